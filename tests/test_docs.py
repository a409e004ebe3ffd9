"""The README and docs/ hold what a user copies: a short README, links that lead somewhere, and
commands the CLI accepts as written (issues 38 and 40)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from envcheck.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 350

# [text](target) and [text](target "title"); images too. Not inside inline code.
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_SHELL_STOPS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "2>&1", "&"}
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _without_code(text: str) -> str:
    """The prose of a Markdown file: fenced blocks and inline code spans blanked out, so a link-shaped
    string inside code is not taken for a link."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m and (fence is None or m.group(2).startswith(fence)):
            fence = None if fence is not None else m.group(2)[:3]
            out.append("")
            continue
        out.append("" if fence is not None else re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def _links(page: Path) -> list[str]:
    return _LINK.findall(_without_code(page.read_text(encoding="utf-8")))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``_`` and ``-`` dropped, spaces to
    hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in _without_code_keep_headings(page.read_text(encoding="utf-8")):
        slug = _slug(line.lstrip("#"))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _without_code_keep_headings(text: str) -> list[str]:
    headings = []
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m and (fence is None or m.group(2).startswith(fence)):
            fence = None if fence is not None else m.group(2)[:3]
            continue
        if fence is None and re.match(r"^#{1,6} ", line):
            headings.append(line)
    return headings


def _bash_lines(page: Path) -> list[str]:
    """Each command of the page's ```bash blocks, continuation lines joined."""
    commands: list[str] = []
    fence: str | None = None
    lang = ""
    pending = ""
    for line in page.read_text(encoding="utf-8").splitlines():
        m = _FENCE.match(line)
        if m and (fence is None or m.group(2).startswith(fence)):
            if fence is None:
                fence, lang = m.group(2)[:3], m.group(3).lower()
            else:
                fence, lang = None, ""
            continue
        if fence is None or lang not in ("bash", "sh", "shell", "console"):
            continue
        text = line.strip()
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        text, pending = pending + text, ""
        if text and not text.startswith("#"):
            commands.append(text)
    return commands


def _envcheck_argv(command: str) -> list[str] | None:
    """The arguments envcheck gets from a shell line, or None when the line runs no envcheck."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError as e:
        pytest.fail(f"not a shell line: {command!r} ({e})")
    for i, word in enumerate(words):
        if word in _SHELL_STOPS:
            words = words[:i]
            break
    while words and _ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    if words and words[0] == "source":
        return None
    if words and words[0] in (".venv/bin/envcheck", "envcheck"):
        return words[1:]
    # python -m envcheck ..., and launchers that end in `-m envcheck ...` (torchrun, srun)
    for i in range(len(words) - 1):
        if words[i] == "-m" and words[i + 1] == "envcheck":
            return words[i + 2:]
    return None


def _parse(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(argv)
        except SystemExit as e:
            return int(e.code or 0), err.getvalue()
    return 0, ""


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/ (at most {README_MAX_LINES})"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_lead_to_files_and_headings(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if not dest.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
            continue
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_has_commands_to_check() -> None:
    """The command check below is not vacuous: the README's two set-up commands and the CLI's commands
    are in its bash blocks."""
    lines = _bash_lines(README)
    assert lines[:2] == ["bash scripts/setup.sh", ".venv/bin/envcheck run"]  # the quick start, first
    assert "bash scripts/test.sh" in lines
    used = {argv[0] for line in lines if (argv := _envcheck_argv(line))}
    assert {"probe", "check", "run", "bench", "burn", "fleet", "diff", "history", "render", "export"} <= used


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_envcheck_commands_in_bash_blocks_parse(page: Path) -> None:
    bad = []
    for line in _bash_lines(page):
        argv = _envcheck_argv(line.split("&&")[-1]) if "&&" in line else _envcheck_argv(line)
        if argv is None:
            continue
        code, message = _parse(argv)
        if code != 0:
            bad.append(f"{line!r}: {message.strip()}")
    assert not bad, f"{page.relative_to(ROOT)}: commands the CLI refuses: " + "; ".join(bad)


def test_a_refused_command_is_caught() -> None:
    """The check above fails on what the parser refuses (a wrong option, an unknown command)."""
    assert _parse(_envcheck_argv(".venv/bin/envcheck run --no-such-option") or [])[0] == 2
    assert _parse(_envcheck_argv("envcheck frobnicate") or [])[0] == 2
    assert _envcheck_argv("TRITON_INTERPRET=1 .venv/bin/envcheck bench x.py --quick > out.txt") == [
        "bench", "x.py", "--quick"]
    assert _envcheck_argv(".venv/bin/python -m torch.distributed.run --nproc-per-node 2 -m envcheck fleet --cpu") == [
        "fleet", "--cpu"]
    assert _envcheck_argv("bash scripts/test.sh") is None


def test_docs_index_links_every_page() -> None:
    index = DOCS / "README.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in _links(index)}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p != index and p.resolve() not in linked]
    assert not missing, f"docs/README.md does not link: {', '.join(missing)}"


_SOURCE_PATH = re.compile(r"\b(?:[a-z_]+/)+[a-z_]+\.py\b")


def test_every_source_file_a_page_names_exists() -> None:
    """A module folded into another or renamed takes its name out of the docs: a path a page names
    (``bench/suite.py``, ``envcheck/cli.py``, ``tools/evidence/judge_fit.py``) is a file of the tree, read from
    the root or from ``envcheck/``."""
    stale = sorted({f"{page.name}: {name}" for page in _pages() for name in _SOURCE_PATH.findall(page.read_text())
                    if not (ROOT / name).is_file() and not (ROOT / "envcheck" / name).is_file()})
    assert not stale, stale


# --------------------------------------------------------------------------- the newcomer's path (issue 51)


def test_ops_named_replace_the_default_ones_and_default_names_them() -> None:
    """``--ops workloads`` runs the workloads alone; ``--ops default,workloads`` both; the help says so, and
    ``--dtypes`` names tf32."""
    from envcheck.bench.suite import select
    from envcheck.ops import DEFAULT_OPS, OP_GROUPS

    args = build_parser().parse_args(["run", "--ops", "default,workloads"])
    assert select(args).ops == (*DEFAULT_OPS, *OP_GROUPS["workloads"])
    assert select(build_parser().parse_args(["run", "--ops", "workloads"])).ops == OP_GROUPS["workloads"]
    run_help = " ".join(next(a for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions
                             if "--ops" in a.option_strings).help.split())
    assert "in place of the default" in run_help and "--ops default,workloads" in run_help
    dtypes = next(a for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions
                  if "--dtypes" in a.option_strings).help
    assert "tf32" in dtypes
    for page in (README, DOCS / "measurement.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert "default,workloads" in text and not re.search(r"workloads`? adds", text), page.name


def test_the_triton_on_a_cpu_set_up_says_what_it_needs() -> None:
    """docs/userbench.md: the pinned Triton that set-up installs (the same pin as scripts/setup.sh), the
    environment variable, and that the interpreter measures no speed."""
    pin = re.search(r'^TRITON="(triton==[0-9.]+)"', (ROOT / "scripts" / "setup.sh").read_text(), re.M)
    assert pin is not None
    text = (DOCS / "userbench.md").read_text(encoding="utf-8")
    section = text[text.index("## A Triton kernel"):]
    assert pin[1] in section and "TRITON_INTERPRET=1" in section and "bash scripts/setup.sh" in section
    assert "installs Triton only where the tests need it" not in text  # set-up installs it on every CPU machine
    assert all(pin[1] in line for line in (ROOT / "README.md").read_text().splitlines() if "triton==" in line)


def test_one_way_to_write_a_size() -> None:
    """Element counts as the tables write them (``256M``) also where a note names them, and a convolution's
    dimensions with their names, in the reader's language."""
    from envcheck.render import fmt
    from envcheck.render.i18n import case_label, language, size

    assert fmt.param("size", "268435456") == fmt.shape((268435456,)) == "256M"
    assert fmt.param("shapes", ("1024", "1000003", "134217728")) == "1K, 1000003, 128M"
    assert fmt.param("size", "8192x8192x8192") == fmt.shape((8192, 8192, 8192)) == "8192×8192×8192"
    assert size((64, 64, 128, 128, 64, 7, 2), "conv2d") == "N64 C64 H128 W128 K64 R7 stride 2"
    with language("zh-CN"):
        assert size((64, 64, 128, 128, 64, 7, 2), "conv2d") == "N64 C64 H128 W128 K64 R7 步长 2"
    assert size((8192, 8192, 8192), "matmul") == "8192×8192×8192"
    assert case_label(("conv2d", "torch", "fp16", "fp16", (8, 3, 32, 32, 16, 3, 1))).endswith(
        "N8 C3 H32 W32 K16 R3 stride 1")
    assert fmt.shape("1 MiB") == "1 MiB"  # text that is no size stays as it is


@pytest.mark.parametrize(("name", "suffix"), [
    ("2026-11-26_0225Z_vm_h200_userbench_softmax-wsum.json.gz", "_vm_h200_bench-softmax-wsum"),
    ("2026-11-26_0456Z_vm_h200.json.gz", "_vm_h200"),
    ("2026-11-28_2058Z_vm_4x-h200_node_quick.json.gz", "_vm_4x-h200_node"),
    ("2026-11-28_1745Z_vm_1x-h200_burn_healthy.json.gz", "_vm_h200_burn"),
    ("2026-11-25_2218Z_fleet-2x_vm_rank-killed.json.gz", "_fleet-2x_vm-0"),
])
def test_a_report_is_named_for_what_it_is(name: str, suffix: str) -> None:
    """A bench report of your own ops is named for them, never like a run of the same minute (which made it
    ``..._vm_cpu-2.json``)."""
    from datetime import datetime, timezone

    from envcheck import model, reportname

    when = datetime(2026, 12, 1, 9, 30, tzinfo=timezone.utc)
    assert reportname.name_for(model.load(ROOT / "evidence" / name), when) == "2026-12-01_0930Z" + suffix
