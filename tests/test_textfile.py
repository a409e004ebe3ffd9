"""The Prometheus textfile is replaced whole by envcheck's own writer: fsynced, and what a killed export
left beside it is removed by the next one (issue 36, item 10). A file beside it that envcheck did not
stage (prometheus_client's ``<name>.<pid>.<thread>`` included) is never removed (issue 46, item 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from envcheck import files
from envcheck.cli import main

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "tests" / "golden" / "node_x2.json")  # a failing report: export exits 1 (its verdict)

# An export whose process is killed (SIGKILL: no cleanup) at the instant it would rename its temporary.
KILLED_AT_RENAME = """
import os, signal, sys
def killed(*a, **k):
    os.kill(os.getpid(), signal.SIGKILL)
os.replace = killed
os.rename = killed
from envcheck.cli import main
main(["export", sys.argv[1], "--format", "prometheus", "--out", sys.argv[2]])
"""


def test_a_killed_export_leaves_nothing_the_next_export_keeps(tmp_path: Path) -> None:
    prom = tmp_path / "envcheck.prom"
    prom.write_text("# the previous run's textfile\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", KILLED_AT_RENAME, SRC, str(prom)], env=env, timeout=120)
    assert proc.returncode == -9
    assert prom.read_text() == "# the previous run's textfile\n"  # node_exporter still reads a whole file
    assert main(["export", SRC, "--format", "prometheus", "--out", str(prom)]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["envcheck.prom"]
    assert any(f.name == "envcheck_verdict_ok" for f in text_string_to_metric_families(prom.read_text()))


def test_the_textfile_is_flushed_to_the_disk_before_its_rename(tmp_path: Path, monkeypatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    assert main(["export", SRC, "--format", "prometheus", "--out", str(tmp_path / "e.prom")]) == 1
    assert "fsync" in events and events.index("fsync") < events.index("replace")


def test_replace_file_replaces_whole_and_refuses_a_folder(tmp_path: Path) -> None:
    target = tmp_path / "t.prom"
    files.replace_file(target, "one\n")
    files.replace_file(target, "two\n")
    assert target.read_text() == "two\n" and sorted(p.name for p in tmp_path.iterdir()) == ["t.prom"]
    (tmp_path / "d").mkdir()
    try:
        files.replace_file(tmp_path / "d", "x")
    except IsADirectoryError:
        pass
    else:
        raise AssertionError("a folder was replaced")
    assert (tmp_path / "d").is_dir()
