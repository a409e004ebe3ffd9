"""Where a dated report goes: ``--format`` and ``--out-dir`` checked before a long run, then the report written
once (anonymized where asked, analysed, its JSON under a fresh name, its renderings beside it); every command that
writes a dated report (run, bench, burn, fleet, snapshot) publishes through here."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from envcheck import model, reportname
from envcheck.commands import say
from envcheck.errors import UsageError
from envcheck.model import Report
from envcheck.render.i18n import t

if TYPE_CHECKING:
    from envcheck.analysis import Analysis

FORMATS = ("json", "md", "html", "junit", "prometheus")


def output_formats(formats: Sequence[str]) -> list[str]:
    """``--format`` validated; JSON is always written (it is the report), so it is dropped here."""
    picked = []
    for f in formats:
        f = f.strip().lower()
        if f not in FORMATS:
            raise UsageError("error.format_unknown", format=repr(f), known=FORMATS)
        if f != "json" and f not in picked:
            picked.append(f)
    return picked


def output_dir(text: str | None) -> Path:
    """``--out-dir`` (else the user's reports folder: userdirs.py), made and checked writable before a long run;
    every command that writes a dated report resolves its folder here."""
    from envcheck.userdirs import out_dir as default_out_dir

    d = Path(default_out_dir(text)).expanduser()
    try:
        if d.exists() and not d.is_dir():
            raise UsageError("error.out_dir_file", path=d)
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a name the file system refuses (too long) as much as a folder it refuses
        raise UsageError("error.out_dir_create", path=d, error=e.strerror or e) from None
    if not os.access(d, os.W_OK | os.X_OK):
        raise UsageError("error.out_dir_unwritable", path=d)
    return d


def fallback_dirs() -> list[Path]:
    """Where a finished run's JSON goes when ``--out-dir`` refuses it (each made private before use)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return [Path(state) / "envcheck" / "reports", Path(tempfile.gettempdir()) / "envcheck-reports"]


def save_json(report: Report, out_dir: Path, stem: str, stderr: TextIO | None = None,
              command: str = "run") -> Path | None:
    """The report JSON under a fresh name in ``out_dir``, else in a fallback folder (said so); None only when
    nowhere takes it, and then the JSON goes to stdout: a finished run is never lost."""
    from envcheck.destination import DestinationError, private_folder

    content = model.dumps(report)
    tried: list[str] = []
    for folder in [out_dir, *fallback_dirs()]:
        try:
            if folder == out_dir:
                folder.mkdir(parents=True, exist_ok=True)
            else:
                private_folder(folder)  # a planted symlink or someone else's folder is skipped
            path = reportname.write_report(folder, stem, content)
        except DestinationError as e:
            tried.append(str(e))
            continue
        except (OSError, model.ReportError) as e:
            tried.append(f"{folder} ({getattr(e, 'strerror', None) or e})")
            continue
        if folder != out_dir:
            say(t(f"run.cli.saved_elsewhere{'.skipped' if len(tried) > 1 else ''}", tried=tried[0],
                   folder=path.parent, skipped="; ".join(tried[1:])), stderr, command)
        return path
    say(t("run.cli.not_saved", tried="; ".join(tried), command=command), stderr, command)
    sys.stdout.write(content)
    sys.stdout.flush()
    return None


@dataclass(frozen=True)
class Published:
    """A finished report as written: anonymized where asked, analysed once, and the stream its summary goes to."""

    report: Report
    analysis: Analysis
    written: list[Path]
    stopped: bool  # Ctrl-C during the rendering (the JSON is whole)
    stream: TextIO | None


def publish(report: Report, key: bytes | None, out_dir: Path, formats: Sequence[str], when: datetime,
            stderr: TextIO | None, stdout: TextIO | None, command: str) -> Published:
    """Every dated report once made: anonymized, analysed, its JSON under a fresh name with the renderings beside it
    (all or none, never raising: a message says what was not), the summary to stdout unless the JSON went there."""
    from envcheck.analysis import analyse

    if key is not None:
        from envcheck.anonymize import for_this_machine

        report = for_this_machine(report.host, key).report(report)
    analysis = analyse(report)
    json_path = save_json(report, out_dir, reportname.name_for(report, when), stderr, command)
    if json_path is None:  # what a user saves from stdout is the JSON alone
        return Published(report, analysis, [], False, stderr if stderr is not None else sys.stderr)
    if not formats:
        return Published(report, analysis, [json_path], False, stdout)
    from envcheck.render.writing import outcome_message, render_after_run

    outcome = render_after_run(report, analysis, json_path, formats)
    message = outcome_message(outcome, json_path)
    if message:
        say(message, stderr, command)
    return Published(report, analysis, [json_path, *outcome.written], outcome.interrupted, stdout)
