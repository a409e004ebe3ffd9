"""The terminal: readable at 100 columns (no wrapped cell), plain in a pipe, never driven by machine text."""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

import compare_data
import factories
import factories_cpu
import pytest
from evidence_files import text as evidence_text
from in_lang import print_checks, print_diff, print_environment, print_history, print_run
from rich.cells import cell_len

from envcheck.analysis import analyse
from envcheck.model import Check, load
from envcheck.render import fmt
from envcheck.render.escape import term, visible
from envcheck.render.terminal.compare import MAX_ROWS
from envcheck.render.terminal.console import capture, make_console
from envcheck.render.view import sections

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "evidence" / "2026-11-22_0104Z_vm_h200.json.gz"
RULE = re.compile(r"^[-─]{8,}$")
LIST_HEAD = re.compile(r"^\S.* \(\d+\)$")  # "Not compared (3)": a list right below a table
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

LONG_CHECKS = (
    Check("torch.build", "fail", "PyTorch build matches the hardware",
          "2.11.0+cpu is a CPU-only build on a machine with 1 NVIDIA GPU(s) and driver 580.159.04 (CUDA 13.0)",
          fix="pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu130"),
    Check("triton.smoke", "pass", "Triton kernel compiles and runs",
          "masked vector add exact: first call (JIT compile) 1.47 s, second call 0.11 ms"),
    Check("wsl.gpu", "skip", "WSL2 GPU path", "not WSL: the WSL2 checks do not apply"),
)


@pytest.fixture(scope="module")
def h200():
    return load(H200)


def tables(text: str) -> list[list[str]]:
    """The rows of every table: the lines after a header rule, up to the first line that is not a row."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if RULE.match(line.strip()) and i > 0:
            rows = []
            for row in lines[i + 1:]:
                if (not row.strip() or row.startswith((" -", " !", "Flags", "%theor", "GB/s (")) or RULE.match(row.strip())
                        or LIST_HEAD.match(row)):
                    break
                rows.append(row)
            out.append(rows)
    return out


def assert_fits(text: str, width: int = 100) -> None:
    """No line wider than the terminal, none with trailing blanks (the padding rich adds to cells)."""
    wide = [ln for ln in text.splitlines() if cell_len(ln) > width]
    assert not wide, wide[:3]
    assert all(ln == ln.rstrip() for ln in text.splitlines())


def test_run_summary_at_100_columns_has_one_line_per_row(h200):
    a = analyse(h200)
    text = capture(lambda c: print_run(c, h200, a), width=100)
    assert_fits(text)
    expected = [len({(fmt.precision_label(r.case.dtype, r.case.precision), r.case.shape) for r in rs})
                for _, rs in sections(a.bench)]
    op_tables = tables(text)[:len(expected)]
    assert [len(t) for t in op_tables] == expected  # a wrapped cell would add lines
    for rows in op_tables:
        assert all(re.match(r"^\s*\d", row) for row in rows), rows  # every line starts with a size: no continuation
    assert "Flags: L launch-bound, C L2-resident, P power cap, N noisy, ^ above ceiling." in text


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_cpu_and_factory_runs_fit_100_columns(lang):
    for r in (factories.report(), factories_cpu.report()):
        assert_fits(capture(lambda c, r=r: print_run(c, r, analyse(r), lang=lang), width=100))


def test_chinese_run_summary_fits_100_columns(h200):
    text = capture(lambda c: print_run(c, h200, analyse(h200), lang="zh-CN"), width=100)
    assert_fits(text)
    assert "相对 torch 的加速比" in text


def test_the_run_summary_and_the_verdict_list_check_counts_with_the_languages_separator():
    r = factories.report()
    counts = {s: sum(c.status == s for c in r.checks) for s in ("fail", "warn", "pass", "skip")}
    assert sum(1 for n in counts.values() if n) >= 2  # a list to join
    zh = capture(lambda c: print_run(c, r, analyse(r), lang="zh-CN"), width=100)
    line = next(ln for ln in zh.splitlines() if ln.startswith("检查："))
    assert "项" in line and "，" in line and ", " not in line
    verdict = capture(lambda c: print_checks(c, r.checks, 1.0, lang="zh-CN"), width=100).rstrip().splitlines()[-1]
    assert "，" in verdict and ", " not in verdict


def test_checks_at_100_columns_are_a_list_that_keeps_the_fix_whole():
    text = capture(lambda c: print_checks(c, LONG_CHECKS, 5.2), width=100)
    assert_fits(text)
    lines = text.splitlines()
    fix = next(i for i, ln in enumerate(lines) if "fix:" in ln)
    assert "https://download.pytorch.org/whl/cu130" in lines[fix]  # a command is never cut across lines
    assert lines[fix].index("fix:") == lines[fix - 1].index("and driver") or lines[fix].startswith("     ")
    assert re.search(r"^FAIL +PyTorch build matches the hardware: ", text, re.M)
    assert text.rstrip().endswith("FAIL: 1 failed, 1 passed, 1 skipped in 5.2 s")


def test_checks_on_a_wide_terminal_are_a_table():
    text = capture(lambda c: print_checks(c, LONG_CHECKS), width=160)
    assert re.search(r"^Status +Check +Finding / Fix", text, re.M)


def test_diff_at_100_columns_has_one_line_per_row():
    d = compare_data.judged()  # rows called faster or slower: only a judged pair has them
    text = capture(lambda c: print_diff(c, d), width=100)
    assert_fits(text)
    cmp = d.comparisons[0]
    sig = [c for c in cmp.cases if c.verdict in ("faster", "slower")]
    sizes = [len(t) for t in tables(text)]
    assert sizes[:3] == [len(d.reports), len(cmp.ops), min(len(sig), MAX_ROWS)]
    assert len(sig) > MAX_ROWS and f"({MAX_ROWS}/{len(sig)})" in text


def test_reasons_given_as_keys_are_phrased_in_the_reader_s_language():
    d = compare_data.diff()
    assert "the baseline run was slowed by hw_slowdown, hw_thermal_slowdown" in capture(lambda c: print_diff(c, d),
                                                                                          width=100)
    assert "基准运行时因 hw_slowdown" in capture(lambda c: print_diff(c, d, "zh-CN"), width=100)


def test_history_at_100_columns_fits():
    h = compare_data.history()
    text = capture(lambda c: print_history(c, h), width=100)
    assert_fits(text)
    assert [len(t) for t in tables(text)][:2] == [len(h.points), len(h.points)]


def test_a_pipe_gets_plain_ascii_and_a_terminal_gets_colour(h200):
    a = analyse(h200)
    plain = capture(lambda c: print_run(c, h200, a), width=100)
    assert "\x1b" not in plain and "─" not in plain
    coloured = capture(lambda c: print_run(c, h200, a), width=100, terminal=True)
    assert "\x1b[" in coloured


def test_the_console_policy_reads_columns_in_a_pipe(monkeypatch):
    import io

    monkeypatch.setenv("COLUMNS", "100")
    assert make_console(io.StringIO()).width == 100
    monkeypatch.setenv("COLUMNS", "junk")
    assert make_console(io.StringIO()).width == 120


# --------------------------------------------------------------------------- what the run summary says


def test_wide_summary_shows_throughput_shares_errors_ceilings_and_notes():
    r = factories.report()
    text = capture(lambda c: print_run(c, r, analyse(r), [Path("evidence/x.json")]), width=200)
    assert "×triton" in text and "GB/s (torch/triton)" in text and "TFLOP/s (torch/triton)" in text
    assert "% theor. (torch/triton)" in text and "launch-bound, L2-resident" in text
    assert "NVML: 2 × 3201 MHz max memory clock × 6016-bit bus / 8" in text  # each ceiling with its source
    assert "L2 kept cold" in text  # the worker's note, phrased from its key
    assert "1 × the Triton smoke kernel failed" in text  # skip reasons grouped
    assert "evidence/x.json" in text and "256M" in text and "4096×4096×4096" in text
    assert "Checks: warn" in text and "fix: nvidia-smi --query-compute-apps" in text


def test_written_files_list_documents_by_name_and_chart_folders_by_count():
    from envcheck.render.writing import written_lines

    paths = [Path("r/a.json"), Path("r/a.md"), Path("r/a_charts/x.svg"), Path("r/a_charts/y.svg"), Path("r/a.html")]
    assert written_lines(paths) == ["r/a.json", "r/a.md", "r/a.html", "r/a_charts/ (2)"]


def test_a_case_over_tolerance_is_marked_and_counted():
    r = factories.report()
    cases = list(r.bench.cases)
    i = next(k for k, c in enumerate(cases) if c.op == "matmul" and c.impl == "triton" and c.precision == "fp32")
    cases[i] = dataclasses.replace(cases[i], accuracy=dataclasses.replace(cases[i].accuracy, rel_l2=7.7e-4))
    r = dataclasses.replace(r, benches=(dataclasses.replace(r.bench, cases=tuple(cases)),))
    narrow = capture(lambda c: print_run(c, r, analyse(r)), width=100)
    row = next(ln for ln in narrow.splitlines() if re.match(r"\s*512×512×512\s+fp32 ", ln))
    assert re.search(r"\b\d{3,}%", row)  # the error as a share of its tolerance, far over 100%
    assert "1 row exceeds its error tolerance." in narrow
    wide = capture(lambda c: print_run(c, r, analyse(r)), width=200)
    assert "(7.7e-4" in wide  # the whole-output error beside err/bound


# --------------------------------------------------------------------------- machine text is never markup or control


HOSTILE = "[/] [bold red]red?[/bold red] \x1b[2J\x1b]0;pwned\x07 \u202egnp.exe \u2066x\u2069"


def _clean(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text
    assert not any(c in text for c in BIDI)


def test_hostile_report_strings_are_shown_not_obeyed():
    r = factories.report(host=HOSTILE, gpu_name=HOSTILE)
    r = dataclasses.replace(r, checks=(Check("x", "fail", HOSTILE, HOSTILE, fix=HOSTILE),))
    text = capture(lambda c: print_run(c, r, analyse(r)), width=100)
    _clean(text)
    assert "[bold red]red?[/bold red]" in text and "\\u{001b}[2J" in text and "\\u{202e}" in text
    text = capture(lambda c: print_environment(c, r.environment), width=100)
    _clean(text)
    assert "[bold red]red?[/bold red]" in text


def test_hostile_diff_and_history_strings_are_shown_not_obeyed():
    s = compare_data.Strings(base_label=HOSTILE, other_label="[/]", host="[/]", base_gpu=HOSTILE, other_gpu="[b]x",
                             env_value=HOSTILE, check_title=HOSTILE, check_finding=HOSTILE, check_fix=HOSTILE,
                             reason=HOSTILE, mixed_gpus=True)
    for text in (capture(lambda c: print_diff(c, compare_data.diff(s, comparisons=2)), width=100),
                 capture(lambda c: print_history(c, compare_data.history(s)), width=100)):
        _clean(text)
        assert "[/]" in text


def test_visible_names_every_hidden_character():
    assert visible("a\x1bb\u202ec\u200bd\x00") == "a\\u{001b}b\\u{202e}c\\u{200b}d\\u{0000}"
    assert term("[bold]x[/bold]") == "\\[bold]x\\[/bold]"


@functools.cache
def _analysed(name: str):
    """A committed report and its analysis, read once for the widths and languages below (both immutable)."""
    r = load(ROOT / "evidence" / name)
    return r, analyse(r)


# The fast loop: the width the cut cells were found at, and Chinese (two columns a character) at the narrowest.
@pytest.mark.parametrize(("lang", "width"), [("en", 100), ("zh-CN", 80), pytest.param("en", 80, marks=pytest.mark.slow),
                                             pytest.param("zh-CN", 100, marks=pytest.mark.slow)])
def test_no_cell_is_cut_at_any_width_a_table_too_wide_is_split_with_its_row_names(lang, width):
    """Four implementations (JAX beside torch, Triton, torch.compile) and the node's link table made
    rich cut cells at 100 columns ("23.6 …" for 23.6 µs, "%the…"); a table too wide is now printed as
    several, each repeating the columns that name a row, and no value is lost."""
    for name in ("2026-11-26_0024Z_vm_h200_workloads.json.gz", "2026-11-26_0019Z_vm_2x-h200_node.json.gz",
                 "2026-11-22_2139Z_vm_h200.json.gz"):
        r, a = _analysed(name)
        text = capture(lambda c, r=r, a=a: print_run(c, r, a, lang=lang), width=width)
        assert_fits(text, width)
        assert "…" not in text, (name, [ln for ln in text.splitlines() if "…" in ln][:2])
    wide_text = capture(lambda c, r=r, a=a: print_run(c, r, a, lang=lang), width=200)
    narrow = capture(lambda c, r=r, a=a: print_run(c, r, a, lang=lang), width=80)
    for cell in ("1.08 µs", "1.04×", "2.44 ms"):
        assert (cell in wide_text) == (cell in narrow), cell


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_diff_and_history_at_80_columns_cut_no_cell_and_no_title(lang):
    """At 80 columns the diff's per-op table, the history's trend and peaks, and the comparison's rule
    title were cut ("time ra…", "4373 (91…", "…_node.j…"); now split or put on a line of their own."""
    from envcheck.compare import diff as diff_mod
    from envcheck.compare import history as history_mod

    node = [(n, load(ROOT / "evidence" / n)) for n in ("2026-11-26_0019Z_vm_2x-h200_node.json.gz",
                                                       "2026-11-26_0023Z_vm_2x-h200_node.json.gz")]
    pair = [(n, load(ROOT / "evidence" / n)) for n in ("2026-11-22_2139Z_vm_h200.json.gz", "2026-11-22_2143Z_vm_h200.json.gz")]
    diffs = [diff_mod.diff(p) for p in (node, pair)]
    texts = [capture(lambda c, d=d: print_diff(c, d, lang), width=80) for d in diffs]
    texts.append(capture(lambda c: print_history(c, history_mod.history(pair + node[:1]), lang), width=80))
    texts.append(capture(lambda c: print_diff(c, compare_data.diff(), lang), width=80))
    for text in texts:
        assert_fits(text, 80)
        assert "…" not in text, [ln for ln in text.splitlines() if "…" in ln][:3]
    assert "2026-11-26_0019Z_vm_2x-h200_node.json.gz" in texts[0]


def test_a_user_s_implementation_with_any_name_has_its_column_and_speedup():
    """Issue 38 item 3: the op table listed only torch/triton/compile/jax, so a user's
    ``torch_add_alpha`` vanished from the rows while the speedup summary had it."""
    from envcheck.model import loads

    text = evidence_text(ROOT / "evidence" / "2026-11-26_0028Z_vm_h200_userbench_softmax-wsum.json.gz")
    r = loads(text.replace('"triton"', '"torch_add_alpha"'))
    out = capture(lambda c: print_run(c, r, analyse(r)), width=100)
    header = next(ln for ln in out.splitlines() if ln.lstrip().startswith("Size"))
    assert "torch_add_alpha" in header and "×torch_add_alpha" in header, header
    assert_fits(out)


def test_the_probe_time_says_what_it_covers():
    """Issue 38 item 12: "probed in 0.27 s" while the command took 1.9 s: the figure is the probes' alone."""
    r = factories_cpu.report()
    env = dataclasses.replace(r.environment, probe_s=0.27)
    text = capture(lambda c: print_environment(c, env), width=100)
    assert "the probes took 0.27 s" in text and "start-up not counted" in text


def test_skipped_checks_wrap_indented_findings_stand_apart_and_a_diff_ends_in_one_line(h200):
    """Issue 38 item 11, at 100 columns: skipped-check lines wrapped to column 0; "Findings" ran on
    from the table above it; every diff ended in a 14-line methods paragraph."""
    long = Check("wsl.gpu", "skip", "WSL2 GPU path", "not WSL: the WSL2 checks do not apply " * 5)
    text = capture(lambda c: print_checks(c, (*LONG_CHECKS, long)), width=100)
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Skipped"))
    body = [ln for ln in lines[start + 1:] if ln.strip()][:-1]  # up to the verdict line
    assert len(body) >= 3 and all(ln.startswith("  ") for ln in body), body
    run = capture(lambda c: print_run(c, h200, analyse(h200)), width=100).splitlines()
    at = run.index("Findings")
    assert run[at - 1] == ""
    d = compare_data.diff()
    out = capture(lambda c: print_diff(c, d), width=100).rstrip().splitlines()
    assert "--format md" in out[-1] and len(out[-1]) <= 100 and out[-2].strip() == ""


def test_a_cpu_run_s_noisy_rows_get_no_gpu_machine_remedy():
    """Issue 38 item 6: every CPU row flagged noisy came with "close other busy processes"."""
    r = factories_cpu.report()
    text = capture(lambda c: print_run(c, r, analyse(r)), width=100)
    if "Noisy rows" in text:
        assert "close other" not in text and "nvidia-smi" not in text and "--quick" in text
    from in_lang import translate

    said = translate("en", "rec.noisy.cpu")
    assert "close other" not in said and "--quick" in said


def test_a_written_path_is_printed_whole_however_narrow_the_terminal(tmp_path: Path) -> None:
    """A path folded by the console cannot be copied: the written files stand one to a line, never cut."""
    from envcheck.render.terminal.console import print_written

    path = tmp_path / ("a-long-folder-name-" * 4) / "2026-12-07_1347Z_vm_cpu.zh-CN.md"
    text = capture(lambda c: print_written(c, [path]), width=40)
    assert str(path) in text.splitlines()[-1]
