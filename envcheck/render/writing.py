"""Writing a report's documents: ``<stem>.md`` with ``<stem>_charts/``, and ``<stem>.html``, as one set.

``write_documents`` (``envcheck render``) renders everything in memory first, then writes the set
all or none (``files.write_set``): a refusal, a full disk or Ctrl-C leave the folder as it was,
so the retry it suggests works. ``render_after_run`` is what ``envcheck run`` calls once the JSON
is saved: it never raises, and its ``DocumentsOutcome`` says what exists and what to run next.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envcheck.analysis import Analysis, analyse
from envcheck.errors import UsageError
from envcheck.files import Content, FileSet, SetExistsError, report_stem, write_set
from envcheck.model import Report
from envcheck.render import FORMATS, IMAGE_FORMATS, MACHINE_FORMATS
from envcheck.render.documents import render_html, render_markdown, report_charts
from envcheck.render.i18n import DEFAULT_LANG, LANGS, document_stem


def validate(formats: Sequence[str], lang: str) -> list[str]:
    known = (*FORMATS, *MACHINE_FORMATS, *IMAGE_FORMATS)
    unknown = [f for f in formats if f not in known]
    if unknown:
        raise UsageError(f"unknown format {unknown[0]!r}: choose from {', '.join(known)}")
    if not formats:
        raise UsageError(f"no format given: choose from {', '.join(known)}")
    if lang not in LANGS:
        raise UsageError(f"unknown language {lang!r}: choose from {', '.join(LANGS)}")
    return list(dict.fromkeys(formats))


def document_set(report: Report, json_path: Path, formats: Sequence[str], lang: str = DEFAULT_LANG,
                 out_dir: Path | None = None, analysis: Analysis | None = None) -> FileSet:
    """Every file of the render, in memory: the Markdown, its charts folder, the HTML, the JUnit XML
    (``<stem>.junit.xml``), the Prometheus textfile (``<stem>.prom``) and each chart as PNG asked for
    (``analysis``: the report's, when the caller already has it).

    PNGs go into the charts folder with the SVGs: the folder is replaced whole, so it always holds
    what the Markdown links to."""
    fmts = validate(formats, lang)
    folder = Path(out_dir) if out_dir is not None else Path(json_path).parent
    stem = document_stem(report_stem(json_path), lang)
    analysis = analysis or analyse(report)
    out = FileSet()
    if "junit" in fmts:
        from envcheck.render.junit import junit_xml

        out.files[folder / f"{stem}.junit.xml"] = junit_xml(analysis, lang)
    if "prometheus" in fmts:
        from envcheck.render.prometheus import prometheus_text

        out.files[folder / f"{report_stem(json_path)}.prom"] = prometheus_text(analysis)
    if not {"md", "html", "png"} & set(fmts):
        return out
    charts = report_charts(analysis, lang)
    from envcheck.render.charts import draw_all

    draw_all(charts)
    if "md" in fmts:
        out.files[folder / f"{stem}.md"] = render_markdown(report, lang, f"{stem}_charts", analysis, charts)
    if charts and ("md" in fmts or "png" in fmts):
        files: dict[str, Content] = {f"{c.name}.svg": c.svg for c in charts}
        if "png" in fmts:
            files |= {f"{c.name}.png": c.png() for c in charts}
        out.folders[folder / f"{stem}_charts"] = files
    if "html" in fmts:
        out.files[folder / f"{stem}.html"] = render_html(report, lang, analysis, charts)
    return out


def write_documents(report: Report, json_path: Path, formats: Sequence[str], lang: str = DEFAULT_LANG,
                    out_dir: Path | None = None, force: bool = False, analysis: Analysis | None = None) -> list[Path]:
    """Render and write the documents of ``report``; the paths written (each chart file included).

    UsageError (nothing written) when a target exists and ``force`` is not given, or when the
    folder cannot be written; OSError from the disk leaves the folder as it was.
    """
    folder = Path(out_dir) if out_dir is not None else Path(json_path).parent
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is not a folder")
    files = document_set(report, json_path, formats, lang, out_dir, analysis)
    source = Path(json_path).resolve()
    if any(p.resolve() == source for p in (*files.files, *files.folders)):
        raise UsageError(f"{json_path} would be replaced by its own rendering: rename the report to end in .json, "
                         "or render into another folder with --out DIR")
    try:
        return write_set(files, force=force)
    except SetExistsError as e:
        more = f" (and {len(e.existing) - 1} more)" if len(e.existing) > 1 else ""
        raise UsageError(f"{e.existing[0]} already exists{more}; --force replaces the rendered files") from None
    except (IsADirectoryError, NotADirectoryError) as e:
        raise UsageError(str(e)) from None


def render_command(json_path: Path, formats: Sequence[str], lang: str) -> str:
    """The ``envcheck render`` command that writes these documents again."""
    args = ["envcheck", "render", str(json_path)]
    if sorted(formats) != sorted(FORMATS):
        args += ["--format", ",".join(formats)]
    if lang != DEFAULT_LANG:
        args += ["--lang", lang]
    return shlex.join(args)


@dataclass(frozen=True)
class DocumentsOutcome:
    """What a render after a run left: ``written`` (all of the set, or nothing), and when nothing,
    why (``error``: one line; ``interrupted``: Ctrl-C) and the command that renders them later."""

    written: tuple[Path, ...]
    error: str | None = None
    interrupted: bool = False
    retry: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.interrupted


def render_after_run(report: Report, json_path: Path, formats: Sequence[str], lang: str = DEFAULT_LANG,
                     analysis: Analysis | None = None) -> DocumentsOutcome:
    """Write the documents of a report whose JSON is saved; never raises, Ctrl-C included.

    The set is written all or none, so after a failure none of its files exists and ``retry``
    works as given. A bug in a renderer must not lose a run either: any exception is reported.
    """
    retry = render_command(json_path, formats, lang)
    try:
        return DocumentsOutcome(tuple(write_documents(report, json_path, formats, lang, analysis=analysis)))
    except KeyboardInterrupt:
        return DocumentsOutcome((), interrupted=True, retry=retry)
    except UsageError as e:
        return DocumentsOutcome((), error=str(e), retry=retry)
    except Exception as e:  # noqa: BLE001 -- the JSON is the report; a rendering failure must not lose the run
        return DocumentsOutcome((), error=f"{type(e).__name__}: {e}", retry=retry)


def outcome_message(outcome: DocumentsOutcome, json_path: Path, lang: str = DEFAULT_LANG) -> str | None:
    """What to tell the user after ``render_after_run`` when the documents were not written (None when they
    were): the JSON is complete and saved, none of the documents exists, and the command that writes them."""
    from envcheck.render.escape import visible
    from envcheck.render.i18n import translate

    if outcome.ok:
        return None
    key = "run.documents.interrupted" if outcome.interrupted else "run.documents.failed"
    return visible(translate(lang, key, json=str(json_path), error=outcome.error or "", command=outcome.retry or ""))


def written_lines(paths: Sequence[Path]) -> list[str]:
    """The files written: the report and its documents by name, their charts as a folder (escaped as
    ``visible`` does: one printable line each)."""
    paths = [Path(p) for p in paths]
    if not paths:
        return []
    home = paths[0].parent
    lines = [str(p) for p in paths if p.parent == home]
    folders: dict[Path, int] = {}
    for p in paths:
        if p.parent != home:
            folders[p.parent] = folders.get(p.parent, 0) + 1
    lines += [f"{d}/ ({n})" for d, n in folders.items()]
    from envcheck.render.escape import visible

    return [visible(line) for line in lines]  # a name with a newline or bytes that are not UTF-8 stays one line
