"""A snapshot is untrusted input: ``check --replay`` and ``probe --replay`` refuse a bad one in one line, exit 2.

The cases of issue 19 (item 1): fields of the wrong type where the replay seams read them, files
that are not files (a pipe, a device), numbers and nesting past what a parser should take, and
files far larger than any snapshot.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envcheck import cli, snapshot

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).parent / "fixtures" / "snapshots" / "corpus"
BASE = CORPUS / "wsl-4x-rtx4090-torch25.json"


def base() -> dict[str, Any]:
    return json.loads(BASE.read_text())


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def set_path(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


# (where, value, the field the message names): the fields issue 19 found crashing a replay.
MUTATIONS = [
    (("host", "commands", 0), False, "host.commands[0]"),
    (("host", "commands", 0), {}, "host.commands[0].argv"),
    (("host", "python"), ["3.11"], "host.python"),
    (("host", "files"), "x", "host.files"),
    (("host", "links"), 7, "host.links"),
    (("host", "environ"), ["PATH"], "host.environ"),
    (("host", "which"), [], "host.which"),
    (("host", "dirs"), {"a": 1}, "host.dirs"),
    (("host", "errors"), {"/x": [1]}, "host.errors./x"),
    (("host", "packages"), {"torch": "2.5"}, "host.packages.torch"),
    (("host", "runs", "torch_runtime"), [[1, [2]]], "host.runs.torch_runtime"),
    (("host", "cpu_count"), "8", "host.cpu_count"),
    (("nvml", "gpus", 0, "nvmlDeviceGetMemoryBusWidth"), {"value": "384"}, "nvmlDeviceGetMemoryBusWidth.value"),
    (("nvml", "gpus", 0, "nvmlDeviceGetMaxClockInfo[MEM]"), {"value": "10501"},
     "nvmlDeviceGetMaxClockInfo[MEM].value"),
    (("nvml", "count"), "4", "nvml.count"),
    (("meta", "host"), ["h"], "meta.host"),
    (("host", "cpu_count"), 10**30, "host.cpu_count"),
]


@pytest.mark.parametrize(("path", "value", "field"), MUTATIONS, ids=[m[2] for m in MUTATIONS])
@pytest.mark.parametrize("command", ["check", "probe"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_field_of_the_wrong_type_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        path: tuple[Any, ...], value: Any, field: str,
                                                        command: str, fmt: str) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(set_path(base(), path, value)))
    rc, out, err = run_cli([command, "--replay", str(snap), "--format", fmt], capsys)
    assert rc == 2 and out == ""
    [line] = err.strip().splitlines()
    assert str(snap) in line and field in line


def test_the_unmutated_base_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the same file, unmutated, is a replay (exit 0), so the refusals above are the mutations'."""
    rc, out, err = run_cli(["probe", "--replay", str(BASE), "--format", "json"], capsys)
    assert rc == 0 and "NVIDIA GeForce RTX 4090" in out


def test_every_snapshot_of_the_corpus_passes_the_schema() -> None:
    for path in sorted(CORPUS.glob("*.json")):
        snapshot.load(path)


def envcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=env)


def test_a_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "snap.json"
    os.mkfifo(fifo)
    res = envcheck("check", "--replay", str(fifo), cwd=tmp_path)  # the old reader blocked here forever
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()
    assert "not a regular file" in line and str(fifo) in line


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_without_reading_it(device: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    rc, out, err = run_cli(["probe", "--replay", device], capsys)
    assert rc == 2 and "not a regular file" in err and len(err.strip().splitlines()) == 1


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: costs no disk, and would cost seconds and gigabytes to parse
        f.truncate(snapshot.MAX_SNAPSHOT_BYTES + 1)
    rc, out, err = run_cli(["check", "--replay", str(big)], capsys)
    assert rc == 2 and "too large to be a snapshot" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("text", "problem"), [
    ('{"format": "envcheck-snapshot", "version": 1, "meta": {"x": ' + "9" * 5000 + "}}", "not a snapshot"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"format": "envcheck-snapshot", "version": 1, "nvml": {"nvmlX": {"value": ' + "[" * 50_000 + "]" * 50_000
     + "}}}", "nested too deeply"),
    (b"\xff\xfe{}", "not UTF-8"),
])
def test_hostile_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes,
                                  problem: str) -> None:
    path = tmp_path / "snap.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    rc, out, err = run_cli(["check", "--replay", str(path), "--format", "json"], capsys)
    assert rc == 2 and out == ""
    [line] = err.strip().splitlines()
    assert problem in line and str(path) in line


def test_an_integer_past_64_bits_inside_any_answer_is_refused(tmp_path: Path) -> None:
    data = set_path(base(), ("nvml", "gpus", 0, "nvmlDeviceGetFieldValues"), {"value": [{"v": 2**70}]})
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data))
    with pytest.raises(snapshot.SnapshotError, match=r"nvmlDeviceGetFieldValues\.value\[0\]\.v: integer out of range"):
        snapshot.load(path)


def test_real_nvml_captures_pass_the_schema() -> None:
    """The NVML answer types are those of real machines: every captured table in the fixtures fits."""
    from fake_nvml import load_table_file

    from envcheck.snapshot import check_sections

    fixtures = Path(__file__).parent / "fixtures"
    tables = [load_table_file(p) for p in sorted((fixtures / "nvml").glob("*.json"))]
    tables.append(json.loads((fixtures / "h200_capture.json").read_text())["nvml"])
    assert len(tables) > 5
    for table in tables:
        check_sections({"meta": {}, "host": {}, "nvml": table})


@pytest.mark.parametrize(("path", "value", "problem"), [
    # Replaying copies answers recursively: 600 levels passed the parser but exhausted the stack there.
    (("nvml", "gpus", 0, "nvmlDeviceGetFieldValues"), {"value": json.loads("[" * 600 + "]" * 600)},
     "nested more than 32 levels deep"),
    # A GPU count of a billion was a billion GPUs to probe: memory without end.
    (("nvml", "count"), 10**9, "nvml.count: Expected `int` <= 1024"),
    (("nvml", "count"), -5, "nvml.count: Expected `int` >= 0"),
    (("nvml", "gpus", 0, "nvmlDeviceGetTemperature[GPU]"), {"values": [41, "hot"]}, "values[1]: Expected `int"),
    (("version",), True, "version: expected an integer"),
])
def test_values_that_would_exhaust_the_replay_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          path: tuple[Any, ...], value: Any, problem: str) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(set_path(base(), path, value)))
    rc, out, err = run_cli(["probe", "--replay", str(snap), "--format", "json"], capsys)
    assert rc == 2 and problem in one_line(err)


def one_line(err: str) -> str:
    [line] = err.strip().splitlines()
    return line


@pytest.mark.parametrize(("kind", "problem"), [("folder", "is a directory"), ("link to /dev/zero", "not a regular file"),
                                               ("missing", "no such file")])
def test_what_is_not_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str,
                                        problem: str) -> None:
    path = tmp_path / "snap.json"
    if kind == "folder":
        path.mkdir()
    elif kind == "link to /dev/zero":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero here")
        path.symlink_to("/dev/zero")
    rc, out, err = run_cli(["check", "--replay", str(path)], capsys)
    assert rc == 2 and problem in one_line(err)
