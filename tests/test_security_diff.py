"""Nothing compared is not "no regression" (issue 46, item 6): ``diff --fail-on-regression`` that judged no
row exits 3 with one line saying so; a diff that judged rows keeps 0 and 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck import cli
from envcheck.errors import EXIT_NOTHING_COMPARED, EXIT_OK

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
FAILING = ROOT / "tests" / "fixtures" / "snapshots" / "corpus" / "linux-libcuda-so-missing.json"


def _check_report(tmp_path: Path) -> Path:
    out = tmp_path / "check.json"
    assert cli.main(["check", "--replay", str(FAILING), "--format", "health", "--out", str(out)]) == 1
    return out


@pytest.mark.parametrize(("base", "other"), [
    ("cpu_small.json", "cpu_small.json"),  # CPU rows: never judged (no noise estimate covers a host timing)
    ("cpu_small.json", "h200_small.json"),  # no row in common
    ("check", "check"),  # no benchmark at all
])
def test_fail_on_regression_with_nothing_compared_has_its_own_exit_status(tmp_path: Path, base: str, other: str,
                                                                           capsys) -> None:
    check = _check_report(tmp_path) if base == "check" else None
    paths = [str(check) if name == "check" else str(GOLDEN / name) for name in (base, other)]
    capsys.readouterr()
    code = cli.main(["diff", *paths, "--format", "json", "--fail-on-regression", "5"])
    err = capsys.readouterr().err
    assert code == EXIT_NOTHING_COMPARED != EXIT_OK
    assert [line for line in err.splitlines() if "nothing compared" in line] == [err.splitlines()[-1]]


def test_a_diff_with_judged_rows_and_no_regression_still_passes(capsys) -> None:
    h200 = str(GOLDEN / "h200_small.json")
    assert cli.main(["diff", h200, h200, "--format", "json", "--fail-on-regression", "5"]) == EXIT_OK
    assert "nothing compared" not in capsys.readouterr().err


def test_the_exit_statuses_are_in_diff_help(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["diff", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0" in text and "3 with --fail-on-regression, nothing compared" in text
