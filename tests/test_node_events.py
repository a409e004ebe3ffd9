"""The ranks' JSON-lines events (one writer, one reader), one launch-outcome mapping shared by the collective
sweep and the peer copies, and a worker's error as its exception in one line."""

from __future__ import annotations

import io

import pytest

from envcheck.errors import one_line
from envcheck.harness.failures import ChildError, Crash, Outcome, Stopped, Timeout
from envcheck.model.node import Launch
from envcheck.node import collective_worker
from envcheck.node.collective_run import RankOutput, SweepPlan, assemble
from envcheck.node.events import Emitter, read_events
from envcheck.node.peer import PeerPlan, worker_error
from envcheck.node.peer import assemble as assemble_peer


def test_what_the_writer_writes_the_reader_reads_and_a_cut_short_line_is_skipped():
    stream = io.StringIO()
    emit = Emitter(stream)
    emit({"event": "start", "pid": 7})
    emit({"event": "copy", "samples_us": [1.5, 2.0], "error": None})
    text = stream.getvalue() + "not json\n" + '["a list"]\n' + '{"no_event": 1}\n' + '{"event": "do'
    assert text.count("\n") == 5  # one event per line
    assert read_events(text) == [{"event": "start", "pid": 7},
                                 {"event": "copy", "samples_us": [1.5, 2.0], "error": None}]


@pytest.mark.parametrize(("flags", "expected"), [
    ({}, None),
    ({"returncode": 3}, None),  # the worker's own end: its events say what happened
    ({"interrupted": True}, "interrupted"),
    ({"timed_out": True}, "timed_out"),
    ({"interrupted": True, "timed_out": True}, "interrupted"),
    ({"error": "could not start (FileNotFoundError: x)", "returncode": None}, "launch_failed"),
])
def test_launch_outcome_to_error(flags, expected):
    base = {"returncode": 0, **flags}
    launch = Launch(("python",), base.pop("returncode"), 10.0, 1.0, **base)
    assert launch.ended_early == expected


def test_collectives_and_peer_copies_name_a_launch_outcome_alike(tmp_path):
    for flags, expected in (({"timed_out": True}, "timed_out"), ({"interrupted": True}, "interrupted"),
                            ({"error": "could not start"}, "launch_failed")):
        launch = Launch(("python",), None, 10.0, 1.0, **flags)
        assert assemble((), SweepPlan(ops=("all_reduce",), sizes=(1 << 20,)), 2, "node", launch).error == expected
        assert assemble_peer([], (0, 1), PeerPlan(), launch.ended_early, 1.0).error == expected


def test_a_worker_that_fails_reports_its_exception_as_one_line(tmp_path, monkeypatch):
    missing = tmp_path / "no_plan.json"
    with pytest.raises(FileNotFoundError) as info:
        missing.open(encoding="utf-8")
    expected = one_line(info.value)

    raised = Outcome(failure=ChildError(type(info.value).__name__, str(info.value)), returncode=1)
    assert assemble_peer([], (0, 1), PeerPlan(), worker_error(raised, 10.0), 1.0).error == expected
    for out, why in ((Outcome(done=True), None), (Outcome(failure=Crash(-9)), "no_done_event"),
                     (Outcome(failure=Timeout(10.0)), "timed_out"), (Outcome(failure=Stopped("SIGTERM")), "interrupted")):
        assert worker_error(out, 10.0) == why

    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert collective_worker.main(["--plan", str(missing), "--out", str(tmp_path)]) == 1
    text = (tmp_path / "rank0.jsonl").read_text(encoding="utf-8")
    assert [e["event"] for e in read_events(text)] == ["start", "error"] and read_events(text)[1]["text"] == expected
    c = assemble((RankOutput(0, text),), SweepPlan(ops=("all_reduce",), sizes=(1 << 20,)), 1, "node", None)
    assert c.error == "ranks_failed" and c.ranks[0].error == expected
