"""The renderers as the tests call them: in a language given per call (the product chooses it once, in the CLI),
with the report analysed here when a test passes no analysis."""

from __future__ import annotations

from typing import Any

from envcheck.analysis import analyse
from envcheck.render import documents, health, junit, writing
from envcheck.render.i18n import escaping, language, t
from envcheck.render.i18n import phrase as i18n_phrase
from envcheck.render.terminal import bench, burn, checks, compare, crosscheck, environment, node


def render_markdown(report, lang="en", charts_dir="charts", analysis=None, charts=None) -> str:
    with language(lang):
        return documents.render_markdown(report, analysis or analyse(report), charts_dir, charts)


def render_html(report, lang="en", analysis=None, charts=None) -> str:
    with language(lang):
        return documents.render_html(report, analysis or analyse(report), charts)


def render_diff(d, fmt, lang="en") -> str:
    with language(lang):
        return documents.render_diff(d, fmt)


def render_history(h, fmt, lang="en") -> str:
    with language(lang):
        return documents.render_histories([h], fmt)


def render_histories(hs, fmt, lang="en") -> str:
    with language(lang):
        return documents.render_histories(hs, fmt)


def print_run(console, report, analysis, written=(), lang="en") -> None:
    with language(lang):
        bench.print_run(console, report, analysis, written)


def print_fleet(console, report, analysis, written=(), lang="en", full=False) -> None:
    with language(lang):
        node.print_fleet(console, report, analysis, written, full)


def print_diff(console, d, lang="en") -> None:
    with language(lang):
        compare.print_diff(console, d)


def print_history(console, h, lang="en") -> None:
    with language(lang):
        compare.print_history(console, h)


def print_burn(console, a, written=(), lang="en") -> None:
    with language(lang):
        burn.print_burn(console, a, written)


def print_crosscheck(console, a, lang="en", host=None) -> None:
    with language(lang):
        crosscheck.print_crosscheck(console, a, host)


def print_checks(console, items, probe_s=None, lang="en") -> None:
    with language(lang):
        checks.print_checks(console, items, probe_s)


def print_environment(console, env, lang="en", replayed=False) -> None:
    with language(lang):
        environment.print_environment(console, env, replayed)


def junit_xml(a, lang="en") -> str:
    with language(lang):
        return junit.junit_xml(a)


def health_line(a, lang="en", width=health.MAX_LINE) -> tuple[str, int]:
    with language(lang):
        return health.health_line(a, width)


def drain_reason(a, lang="en") -> str | None:
    with language(lang):
        return health.drain_reason(a)


def write_documents(report, json_path, formats, lang="en", out_dir=None, force=False, analysis=None) -> Any:
    with language(lang):
        return writing.write_documents(report, analysis or analyse(report), json_path, formats, out_dir, force)


def document_set(report, json_path, formats, lang="en", out_dir=None, analysis=None) -> Any:
    with language(lang):
        return writing.document_set(report, analysis or analyse(report), json_path, formats, out_dir)


def render_after_run(report, json_path, formats, lang="en", analysis=None) -> Any:
    with language(lang):
        return writing.render_after_run(report, analysis or analyse(report), json_path, formats)


def outcome_message(outcome, json_path, lang="en") -> str | None:
    with language(lang):
        return writing.outcome_message(outcome, json_path)


def translate(lang, key, **params) -> str:
    with language(lang):
        return t(key, **params)


def phrase(lang, key, params=None, escape=str, raw=None) -> str:
    with language(lang), escaping(escape):
        return i18n_phrase(key, params, raw)
