"""Numbers in the docs that come from the evidence, made from it: one command writes them, one test checks them.

A number a page quotes from a committed report or log is marked where it stands, with the expression that
computes it from that file (the functions of ``tools/docs/evidence_values.py``):

    the least room was <!-- value: least_room("power_share") :.1f -->24.4<!-- /value --> points

and a whole table or output excerpt is a block:

    <!-- generated: burn_table() -->
    | report | ... |
    <!-- /generated -->

An expression's result is written as it is when it is text; a number is formatted with the spec after ``:``
(Python's format mini-language, e.g. ``:.1f``, ``:d``, ``:,d``), once, here; a tuple is a range (its items so
formatted, joined by ``-``), a list several values (``a and b``, ``a, b, c``). HTML comments do not show on GitHub, so a page reads as before; markers in a ```markdown block are examples.

    python tools/docs/doc_numbers.py            # rewrite every marked number and block of README.md and docs/*.md
    python tools/docs/doc_numbers.py --check    # list the ones that differ from the evidence (exit 1); what the test runs
"""

from __future__ import annotations

import argparse
import builtins
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import evidence_values  # noqa: E402  (beside this file, not a package)

# ``<!-- value: EXPR [:SPEC] -->TEXT<!-- /value -->`` and ``<!-- generated: EXPR -->\nTEXT<!-- /generated -->``.
# A spec is the last `` :...`` of the comment with no space, quote or parenthesis in it.
_VALUE = re.compile(r"<!-- value: (?P<expr>.+?)(?: :(?P<spec>[^\s'\")]*))? -->(?P<text>.*?)<!-- /value -->", re.S)
_BLOCK = re.compile(r"<!-- generated: (?P<expr>.+?) -->\n(?P<text>.*?)<!-- /generated -->", re.S)
# A ```markdown block shows markers as examples: left as it is.
_EXAMPLE = re.compile(r"^```(?:markdown|md)\n.*?^```$", re.S | re.M)
_BUILTINS = {name: getattr(builtins, name) for name in (
    "abs", "all", "any", "len", "list", "max", "min", "round", "sorted", "str", "sum", "tuple", "set", "range",
    "zip", "int", "float", "enumerate", "dict")}


class MarkerError(Exception):
    """A marker whose expression fails or whose result cannot be written: one line, naming page and marker."""


@dataclass(frozen=True)
class Mismatch:
    page: str
    line: int
    expr: str
    found: str
    expected: str

    def __str__(self) -> str:
        shown = self.expected if "\n" not in self.expected else "(the block as generated)"
        return f"{self.page}:{self.line}: {self.expr} gives {shown!r}, the page says {self.found!r}"


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def namespace(extra: Mapping[str, object] | None = None) -> dict[str, object]:
    ns = {k: v for k, v in vars(evidence_values).items() if not k.startswith("_")}
    ns["__builtins__"] = _BUILTINS
    return {**ns, **(extra or {})}


def written(value: object, spec: str | None) -> str:
    """How a value stands on the page: text as it is, a number formatted once with ``spec``."""
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):  # a range
        return "-".join(written(v, spec) for v in value)
    if isinstance(value, list):  # each of several: "a and b", "a, b, c"
        items = [written(v, spec) for v in value]
        return " and ".join(items) if len(items) == 2 else ", ".join(items)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MarkerError(f"gives {type(value).__name__} {value!r}, not text or a number")
    if isinstance(value, float) and not spec:
        raise MarkerError(f"gives the float {value!r}: say how to write it (e.g. ' :.1f' at the end of the marker)")
    return format(value, spec or "d")


def _evaluate(expr: str, ns: dict[str, object], where: str) -> object:
    try:
        return eval(compile(expr, where, "eval"), ns)  # noqa: S307  (the repository's own pages)
    except MarkerError:
        raise
    except Exception as e:  # noqa: BLE001  (any failure of a page's expression is reported as that page's)
        raise MarkerError(f"{where}: {expr}: {type(e).__name__}: {e}") from None


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def regenerate(text: str, page: str, ns: dict[str, object] | None = None) -> tuple[str, list[Mismatch]]:
    """``text`` with every marker's content made anew, and what differed."""
    ns = ns if ns is not None else namespace()
    found: list[Mismatch] = []

    def block(m: re.Match[str]) -> str:
        where = f"{page}:{_line(text, m.start())}"
        body = _evaluate(m["expr"], ns, where)
        if not isinstance(body, str):
            raise MarkerError(f"{where}: {m['expr']} gives {type(body).__name__}, not the block's text")
        body = body if body.endswith("\n") else body + "\n"
        if body != m["text"]:
            found.append(Mismatch(page, _line(text, m.start()), m["expr"], m["text"], body))
        return f"<!-- generated: {m['expr']} -->\n{body}<!-- /generated -->"

    def value(m: re.Match[str]) -> str:
        where = f"{page}:{_line(text, m.start())}"
        try:
            now = written(_evaluate(m["expr"], ns, where), m["spec"])
        except MarkerError as e:
            if str(e).startswith(where):
                raise
            raise MarkerError(f"{where}: {m['expr']} {e}") from None
        if now != m["text"]:
            found.append(Mismatch(page, _line(text, m.start()), m["expr"], m["text"], now))
        spec = f" :{m['spec']}" if m["spec"] is not None else ""
        return f"<!-- value: {m['expr']}{spec} -->{now}<!-- /value -->"

    examples = _EXAMPLE.findall(text)
    text = _EXAMPLE.sub(lambda m: re.sub(r"[^\n]", "\0", m[0]), text)  # same lines, no markers
    done = _VALUE.sub(value, _BLOCK.sub(block, text))
    for example in examples:
        done = done.replace(re.sub(r"[^\n]", "\0", example), example, 1)
    return done, found


def check(paths: Iterable[Path], root: Path = ROOT, write: bool = False,
          evaluate_in: Callable[[], dict[str, object]] = namespace) -> list[Mismatch]:
    ns = evaluate_in()
    mismatches: list[Mismatch] = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        new, found = regenerate(text, path.relative_to(root).as_posix(), ns)
        mismatches += found
        if write and new != text:
            path.write_text(new, encoding="utf-8")
    return mismatches


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="only list what differs from the evidence (exit 1 if any)")
    p.add_argument("pages", nargs="*", type=Path, help="pages to do (default: README.md and docs/*.md)")
    args = p.parse_args(argv)
    paths = [q.resolve() for q in args.pages] or pages()
    try:
        found = check(paths, write=not args.check)
    except MarkerError as e:
        print(f"numbers: {e}", file=sys.stderr)
        return 2
    for m in found:
        print(m if args.check else f"{m.page}:{m.line}: {m.expr}: {m.found!r} -> written anew")
    return 1 if found and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
