"""Errors before work: what a command can refuse without working (its arguments, where it writes, the tools it
will call) it refuses first, in one line, before reading a report, probing or rendering (issue 51)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck import cli, model

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "tests" / "golden" / "h200_small.json"


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a report or probing the machine is work: either fails the test."""
    from envcheck.probes import collect as collect_mod

    def work(*a: object, **kw: object) -> None:
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(model, "load", work)
    monkeypatch.setattr(collect_mod, "collect", work)


def _one_line_error(capsys: pytest.CaptureFixture[str], *words: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and all(w in err for w in words), err


@pytest.mark.parametrize("form", ["md", "html", "junit", "prometheus"])
def test_render_refuses_a_file_it_would_replace_before_rendering(tmp_path: Path, capsys, no_work, form: str) -> None:
    src = tmp_path / "r.json"
    src.write_bytes(REPORT.read_bytes())
    taken = tmp_path / {"md": "r.md", "html": "r.html", "junit": "r.junit.xml", "prometheus": "r.prom"}[form]
    taken.write_text("mine\n")
    assert cli.main(["render", str(src), "--format", form]) == 2
    _one_line_error(capsys, str(taken), "already exists", "--force")
    assert taken.read_text() == "mine\n"


def test_render_refuses_a_bad_format_before_reading_the_report(tmp_path: Path, capsys, no_work) -> None:
    assert cli.main(["render", str(REPORT), "--format", "pdf", "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, "unknown format 'pdf'")


def test_slurm_drain_without_scontrol_is_refused_before_anything_is_probed(tmp_path: Path, capsys, monkeypatch,
                                                                            no_work) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-n17")
    assert cli.main(["check", "--format", "health", "--slurm-drain"]) == 2
    _one_line_error(capsys, "scontrol is not on PATH")


def test_export_refuses_its_destination_before_reading_the_report(tmp_path: Path, capsys, no_work) -> None:
    taken = tmp_path / "r.xml"
    taken.write_text("mine\n")
    assert cli.main(["export", str(REPORT), "--format", "junit", "--out", str(taken)]) == 2
    _one_line_error(capsys, str(taken), "already exists")
    assert cli.main(["export", str(REPORT), "--format", "prometheus", "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, "is a folder")
    assert cli.main(["export", str(REPORT), "--format", "health", "--out", str(taken / "h.txt")]) == 2
    _one_line_error(capsys, str(taken), "is a file")
