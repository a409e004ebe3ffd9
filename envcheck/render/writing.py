"""A report's documents written as one set (Markdown with its charts, HTML, JUnit, Prometheus), all or none: a
refusal, a full disk or Ctrl-C leave the folder as it was. ``render_after_run`` never raises."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envcheck.analysis import Analysis
from envcheck.errors import UsageError
from envcheck.files import Content, FileSet, SetExistsError, report_stem, write_set
from envcheck.model import Report
from envcheck.render import FORMATS, IMAGE_FORMATS, MACHINE_FORMATS
from envcheck.render.documents import render_html, render_markdown, report_charts
from envcheck.render.escape import visible
from envcheck.render.i18n import DEFAULT_LANG, current, document_stem, t


def validate(formats: Sequence[str]) -> list[str]:
    known = (*FORMATS, *MACHINE_FORMATS, *IMAGE_FORMATS)
    unknown = [f for f in formats if f not in known]
    if unknown:
        raise UsageError("error.format_choose", format=repr(unknown[0]), known=known)
    if not formats:
        raise UsageError("error.format_none", known=known)
    return list(dict.fromkeys(formats))


def document_set(report: Report, analysis: Analysis, json_path: Path, formats: Sequence[str],
                 out_dir: Path | None = None) -> FileSet:
    """Every file of the render, in memory: the Markdown, its charts folder (with each chart as PNG where
    asked: the folder is replaced whole), the HTML, the JUnit XML and the Prometheus textfile."""
    fmts = validate(formats)
    folder = Path(out_dir) if out_dir is not None else Path(json_path).parent
    stem = document_stem(report_stem(json_path))
    out = FileSet()
    if "junit" in fmts:
        from envcheck.render.junit import junit_xml

        out.files[folder / f"{stem}.junit.xml"] = junit_xml(analysis)
    if "prometheus" in fmts:
        from envcheck.render.prometheus import prometheus_text

        out.files[folder / f"{report_stem(json_path)}.prom"] = prometheus_text(analysis)
    if not {"md", "html", "png"} & set(fmts):
        return out
    charts = report_charts(analysis)
    from envcheck.render.charts import draw_all

    draw_all(charts)
    if "md" in fmts:
        out.files[folder / f"{stem}.md"] = render_markdown(report, analysis, f"{stem}_charts", charts)
    if charts and ("md" in fmts or "png" in fmts):
        files: dict[str, Content] = {f"{c.name}.svg": c.svg for c in charts}
        if "png" in fmts:
            files |= {f"{c.name}.png": c.png() for c in charts}
        out.folders[folder / f"{stem}_charts"] = files
    if "html" in fmts:
        out.files[folder / f"{stem}.html"] = render_html(report, analysis, charts)
    return out


def write_documents(report: Report, analysis: Analysis, json_path: Path, formats: Sequence[str],
                    out_dir: Path | None = None, force: bool = False) -> list[Path]:
    """Render and write the documents of ``report``; the paths written. UsageError (nothing written) when a target
    exists without ``force``; OSError from the disk leaves the folder as it was."""
    folder = Path(out_dir) if out_dir is not None else Path(json_path).parent
    if folder.exists() and not folder.is_dir():
        raise UsageError("error.not_folder", path=folder)
    files = document_set(report, analysis, json_path, formats, out_dir)
    source = Path(json_path).resolve()
    if any(p.resolve() == source for p in (*files.files, *files.folders)):
        raise UsageError("error.render_over_source", path=json_path)
    try:
        return write_set(files, force=force)
    except SetExistsError as e:
        more = len(e.existing) - 1
        raise UsageError(f"error.rendered_exists{'.more' if more else ''}", path=e.existing[0], more=more) from None
    except (IsADirectoryError, NotADirectoryError) as e:
        raise UsageError("error.as_is", error=e) from None


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


def render_after_run(report: Report, analysis: Analysis, json_path: Path, formats: Sequence[str]) -> DocumentsOutcome:
    """Write the documents of a report whose JSON is saved; never raises, Ctrl-C included: the set is written
    all or none, so after a failure ``retry`` works as given, and a renderer's bug cannot lose the run."""
    args = ["envcheck", "render", str(json_path)]  # the command that writes these documents again
    args += ["--format", ",".join(formats)] if sorted(formats) != sorted(FORMATS) else []
    args += ["--lang", current()] if current() != DEFAULT_LANG else []
    retry = shlex.join(args)
    try:
        return DocumentsOutcome(tuple(write_documents(report, analysis, json_path, formats)))
    except KeyboardInterrupt:
        return DocumentsOutcome((), interrupted=True, retry=retry)
    except UsageError as e:
        return DocumentsOutcome((), error=str(e), retry=retry)
    except Exception as e:  # noqa: BLE001 -- the JSON is the report; a rendering failure must not lose the run
        return DocumentsOutcome((), error=f"{type(e).__name__}: {e}", retry=retry)


def outcome_message(outcome: DocumentsOutcome, json_path: Path) -> str | None:
    """What to say when the documents were not written (None when they were): the JSON is saved, none of the
    documents exists, and the command that writes them."""
    if outcome.ok:
        return None
    key = "run.documents.interrupted" if outcome.interrupted else "run.documents.failed"
    return visible(t(key, json=str(json_path), error=outcome.error or "", command=outcome.retry or ""))


def written_lines(paths: Sequence[Path]) -> list[str]:
    """The files written: the report and its documents by name, their charts as a folder (escaped as
    ``visible`` does: one printable line each)."""
    paths = [Path(p) for p in paths]
    if not paths:
        return []
    home = paths[0].parent
    lines = [str(p) for p in paths if p.parent == home]
    lines += [f"{d}/ ({n})" for d, n in Counter(p.parent for p in paths if p.parent != home).items()]
    return [visible(line) for line in lines]  # a name with a newline or bytes that are not UTF-8 stays one line
