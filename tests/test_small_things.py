"""The small things of issue #21, each held where it was wrong: legends only for columns shown,
counters in plain units over an honest interval, checks that do not apply skip, notes wrapped."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import factories_cpu
import node_reports
import pytest
from in_lang import print_run, render_markdown

from envcheck import cli
from envcheck.analysis import analyse
from envcheck.checks import links, triton
from envcheck.model import Environment, Fact, known
from envcheck.render.terminal.console import capture

ROOT = Path(__file__).resolve().parent.parent
EXPONENT = re.compile(r"\d[eE][+-]?\d")


def _narrow(report, lang="en") -> str:
    return capture(lambda c: print_run(c, report, analyse(report), lang=lang), width=80)


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_cpu_runs_legend_explains_only_columns_it_shows(lang):
    from in_lang import translate

    theor = translate(lang, "term.legend.theor")
    cpu = _narrow(factories_cpu.report(), lang)
    assert translate(lang, "term.col.best_pct") not in cpu  # the table has no such column
    assert theor.split("：")[0].split(":")[0] not in cpu
    assert translate(lang, "term.legend.err_tol").split("：")[0].split(":")[0] in cpu
    gpu = _narrow(node_reports.node_report(), lang)
    assert theor.split("：")[0].split(":")[0] in gpu  # a GPU run has the column, and its legend


def _links_env(uptime_s: float, crc: int, gpus: bool = True) -> Environment:
    section: dict[str, Fact] = {"uptime_s": known(uptime_s), "xid_events": known([]), "xid_source": known("dmesg")}
    if gpus:
        section["gpu0.nvlink_errors"] = known([{"link": 0, "crc_flit": 0, "crc_data": crc, "replay": 0, "recovery": 0,
                                                 "ecc_data": 0}])
    return Environment({links.SECTION: section})


@pytest.mark.parametrize(("uptime_s", "span"), [(30.0, "30 s"), (12 * 60.0, "12 min"), (5 * 86400.0, "5.0 d")])
def test_link_counter_rates_are_plain_numbers_over_the_interval_they_cover(uptime_s, span):
    c = links.check_nvlink(_links_env(uptime_s, 700), 0)
    assert c.status == "pass"
    assert not EXPONENT.search(c.finding), c.finding
    assert f"over {span}" in c.finding and "0.0 h" not in c.finding


def test_node_counter_table_shows_rates_with_units_not_exponents():
    from in_lang import translate

    from envcheck.model import load

    doc = render_markdown(load(ROOT / "evidence" / "2026-11-22_2147Z_vm_2x-h200_node.json.gz"))
    head = next(line for line in doc.splitlines() if translate("en", "node.col.boot_per_s") in line)
    table = doc[doc.index(head):]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    rows = rows[:next((i for i, r in enumerate(rows) if r.startswith("|---")), len(rows))]
    assert len(rows) >= 4
    for row in rows:
        assert not EXPONENT.search(row), row
    assert any(re.search(r"\d/(s|min|h|d)\b", row) for row in rows)


def test_no_xid_verdict_without_a_gpu_to_log_one():
    c = links.check_xid(_links_env(3600.0, 0, gpus=False))
    assert c.status == "skip" and "Xid" in c.title


def test_a_cpu_only_machine_gets_no_triton_fix():
    env = Environment({"triton": {"installed": known(False)}, "driver": {"gpu_count": known(0)}})
    c = triton.check_installed(env)
    assert c.status == "skip" and c.fix is None


def test_a_gpu_machine_without_triton_is_told_how_to_install_it():
    env = Environment({"triton": {"installed": known(False)}, "driver": {"gpu_count": known(1)}})
    c = triton.check_installed(env)
    assert c.status == "warn" and c.fix and "pip install triton" in c.fix


def test_history_notes_on_stderr_fit_the_terminal(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "a-folder-with-a-rather-long-name-for-its-reports"
    folder.mkdir()
    shutil.copy(ROOT / "evidence" / "2026-11-21_2341Z_vm_h200_check.json.gz", folder)
    shutil.copy(ROOT / "evidence" / "2026-11-21_2341Z_vm_h200.json.gz", folder)
    monkeypatch.setenv("COLUMNS", "60")
    assert cli.main(["history", str(folder)]) == 0
    err = capsys.readouterr().err
    assert "2026-11-21_2341Z_vm_h200_check.json.gz" in err  # a file name stays whole
    assert err.strip() and all(len(line) <= 60 for line in err.splitlines()), err
