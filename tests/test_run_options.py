"""``envcheck run`` options refused before anything runs: one line on stderr, exit status 2."""

from __future__ import annotations

import pytest

from envcheck import cli


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "0", "-5", "soon"])
def test_a_timeout_that_would_never_stop_anything_is_refused_in_one_line(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["run", f"--timeout={value}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("envcheck run: error: argument --timeout: ")
    assert repr(value) in err


def test_check_timeout_is_validated_the_same_way(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["check", "--timeout", "inf"])
    assert e.value.code == 2 and "finite positive" in capsys.readouterr().err


def test_help_says_what_quick_does_with_sizes_and_that_a_missing_device_is_an_error(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "with --sizes, those sizes with the quick sampling" in text
    assert "an index this machine lacks is an error" in text


def test_run_help_names_every_built_in_op_and_the_workloads_group(capsys):
    from envcheck import cli
    from envcheck.ops import OP_NAMES

    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "workloads:" in text
    assert all(op in text for op in OP_NAMES), [op for op in OP_NAMES if op not in text]
