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
    assert "bash scripts/setup.sh && .venv/bin/envcheck run" in lines
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
