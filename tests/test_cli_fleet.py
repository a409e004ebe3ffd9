"""envcheck fleet's options, baseline files and the report rank 0 writes."""

from __future__ import annotations

import pytest
from node_fakes import bench_with_bandwidth

from envcheck import model
from envcheck.cli import build_parser, parse
from envcheck.commands import fleet as cmd
from envcheck.commands.options import FleetOptions, Gpus
from envcheck.commands.publish import publish
from envcheck.errors import UsageError
from envcheck.model import Environment, Report
from envcheck.model.fleet import Fleet, FleetNode, RankStatus, Rule


def _fleet() -> Fleet:
    bench = bench_with_bandwidth(0, 4200.0)
    return Fleet(2, 2, "torchrun", (FleetNode("n0", (0,), benches=(bench,)), FleetNode("n1", (1,))),
                 (RankStatus(0, "ok", "n0"), RankStatus(1, "timeout", "n1", given_s=900.0)))


def test_fleet_options_parse():
    args = parse(["fleet", "--baseline", "b.json", "--rule", "gpu.bandwidth_gbps:higher:0.1", "--sweep-sizes", "1M..1G",
                  "--cpu"])
    assert isinstance(args, FleetOptions) and args.cpu and args.rank_timeout == 900.0
    assert cmd.parse_rule(args.rule[0]) == Rule("gpu.bandwidth_gbps", "higher", 0.1)
    assert cmd.parse_sweep_sizes(args.sweep_sizes) == (1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30)
    assert cmd.parse_sweep_sizes("64K,1M") == (1 << 16, 1 << 20)


@pytest.mark.parametrize("text", ["gpu.bandwidth_gbps:higher", "x:sideways:0.1", "x:higher:2"])
def test_bad_rules_are_usage_errors(text):
    with pytest.raises(UsageError, match="--rule"):
        cmd.parse_rule(text)


def test_run_takes_gpus_and_an_outlier_margin():
    args = parse(["run", "--gpus", "all", "--outlier-margin", "0.1"])
    assert (args.gpus, args.outlier_margin) == (Gpus(), 0.1)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--outlier-margin", "1.5"])


def _write(out_dir, formats=(), stderr=None):
    """What rank 0 writes: the fleet report's JSON (and its documents), as ``envcheck fleet`` publishes it."""
    from datetime import datetime, timezone

    report = cmd.fleet_report(_fleet(), None)
    return publish(report, None, out_dir, formats, datetime.now(timezone.utc), stderr, None, "fleet").written


def test_a_fleet_report_is_a_baseline_for_the_next(tmp_path):
    [path] = _write(tmp_path)
    report = model.load(path)
    assert report.kind == "fleet" and report.fleet == _fleet()
    base = cmd.load_baseline(str(path))
    assert {r.metric: r.value for r in base.values} == pytest.approx({"gpu.bandwidth_gbps": 4200.0, "checks.failed": 0.0})
    [again] = _write(tmp_path)
    assert again != path  # never replaced


def test_a_single_node_report_is_a_baseline_too(tmp_path):
    p = tmp_path / "one.json"
    model.dump(Report("0", "t", "box", "run", Environment(), benches=(bench_with_bandwidth(0, 4300.0),)), p)
    values = {r.metric: r.value for r in cmd.load_baseline(str(p)).values}
    assert values["gpu.bandwidth_gbps"] == pytest.approx(4300.0)


def test_a_baseline_that_is_no_report_is_one_line(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"format": "envcheck-report", "schema_version": 2, "host": 3}')
    with pytest.raises(UsageError, match="--baseline .*bad.json"):
        cmd.load_baseline(str(p))


def test_an_unreadable_baseline_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="--baseline"):
        cmd.load_baseline(str(tmp_path / "missing.json"))


def test_summary_names_the_rank_that_timed_out_and_the_nodes_to_drain():
    import io

    from envcheck.analysis import analyse

    report = cmd.fleet_report(_fleet(), None)
    out = io.StringIO()
    cmd.print_summary(report, analyse(report), [], out)
    text = out.getvalue()
    assert "Rank 1 on n1 sent nothing from its own suite in the 900 s it was given." in text
    assert "Take out of service: n1." in text
    assert "n1    1      take out of service" in text


def test_the_summary_is_phrased_in_the_reader_s_language():
    import io

    from envcheck.analysis import analyse
    from envcheck.render.i18n import language

    report = cmd.fleet_report(_fleet(), None)
    out = io.StringIO()
    with language("zh-CN"):
        cmd.print_summary(report, analyse(report), [], out)
    assert "需下线：n1。" in out.getvalue() and "Take out of service" not in out.getvalue()


def test_rank_0_writes_the_documents_beside_the_json(tmp_path):
    path, *written = _write(tmp_path, ["md", "html"])
    assert {p.suffix for p in written} == {".md", ".html"} and all(p.parent == tmp_path for p in written)
    assert "Take out of service: n1." in path.with_suffix(".md").read_text()


# --------------------------------------------------------------------------- a destination that refuses (issue 36, 11)


def test_a_full_out_dir_at_the_end_sends_the_fleet_report_to_the_fallback_with_one_line(tmp_path, monkeypatch):
    import errno
    import io

    from envcheck import reportname
    from envcheck.commands import publish as publish_cmd

    out_dir, fallback = tmp_path / "out", tmp_path / "fallback"
    real = reportname.write_report

    def full(folder, stem, content):
        if folder == out_dir:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(folder, stem, content)

    monkeypatch.setattr(reportname, "write_report", full)
    monkeypatch.setattr(publish_cmd, "fallback_dirs", lambda: [fallback])
    err = io.StringIO()
    [path] = _write(out_dir, stderr=err)
    assert path is not None and path.parent == fallback and model.load(path).fleet == _fleet()
    [line] = err.getvalue().splitlines()
    assert line.startswith("envcheck fleet: warning:") and "No space left on device" in line
    assert f"saved it in {fallback}" in line


@pytest.mark.parametrize("why", ["a file", "read-only"])
def test_rank_0_refuses_an_out_dir_it_cannot_write_before_any_work(tmp_path, monkeypatch, capsys, why):
    import os

    from envcheck import cli
    from envcheck.node import transport

    def started(*args, **kwargs):
        raise AssertionError("the fleet started before its destination was checked")

    monkeypatch.setattr(transport, "open_store_transport", started)
    monkeypatch.setattr(cmd, "_has_gpu", started)
    for k, v in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(k, v)
    if why == "a file":
        (tmp_path / "f").write_text("mine")
        out = tmp_path / "f" / "reports"
    else:
        out = tmp_path / "ro"
        out.mkdir()
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(out) else real(p, mode, **kw))
    assert cli.main(["fleet", "--cpu", "--out-dir", str(out)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--out-dir" in line and ("is a file" in line or "not writable" in line or "cannot create" in line)
