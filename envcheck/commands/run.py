"""``envcheck run``: probes, checks, the benchmark suite, a dated report, a terminal summary.

Steps: validate the options (before anything slow), probe the machine with the runtime
probes, evaluate the checks, plan the suite, run the isolated worker with progress on
stderr, write ``<out-dir>/<stamp>_<host>_<gpu-or-cpu>.json`` (never replacing a file) and
the Markdown / HTML beside it, then print the summary on stdout.

Exit status:
  0    every check passed or warned, and every measured case passed
  1    a check failed, a case failed numerically or could not run, the worker crashed or
       timed out (the partial report is still written), or nothing could be measured
  130  Ctrl-C, SIGTERM or SIGHUP during the benchmark (the partial report is written first)
  2    bad options (one line on stderr; nothing is run)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envcheck import model, reportname
from envcheck.bench import assemble, runner, suite
from envcheck.bench.protocol import CaseStarted, Event, Measured, Skipped
from envcheck.errors import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError
from envcheck.model import Check, Environment, Report

if TYPE_CHECKING:
    from envcheck.analysis import Analysis

FORMATS = ("json", "md", "html")
RUNTIME_PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Collaborators:
    """The modules ``run`` drives; tests pass fakes (a scripted worker, a canned environment)."""

    collect: Callable[..., Environment]
    evaluate: Callable[[Environment], Sequence[Check]]
    new_report: Callable[..., Report]
    worker_command: Sequence[str] = runner.WORKER_COMMAND


def collaborators() -> Collaborators:
    """The real probes, checks and renderers: the one place they are imported."""
    from envcheck.probes.collect import collect, new_report

    try:
        from envcheck.checks import evaluate
    except ImportError:  # checks not installed in this build: the report carries facts only
        def evaluate(env: Environment) -> tuple[Check, ...]:
            return ()
    return Collaborators(collect=collect, evaluate=evaluate, new_report=new_report)


# --------------------------------------------------------------------------- options


def output_formats(formats: Sequence[str]) -> list[str]:
    """``--format`` validated; JSON is always written (it is the report), so it is dropped here."""
    picked = []
    for f in formats:
        f = f.strip().lower()
        if f not in FORMATS:
            raise UsageError(f"--format: unknown format {f!r} (valid: {', '.join(FORMATS)})")
        if f != "json" and f not in picked:
            picked.append(f)
    return picked


def output_dir(text: str) -> Path:
    """``--out-dir`` created if needed, and checked writable, before a long run starts."""
    d = Path(text).expanduser()
    if d.exists() and not d.is_dir():
        raise UsageError(f"--out-dir: {d} is a file, not a folder")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out-dir: cannot create {d} ({e.strerror or e})") from None
    if not os.access(d, os.W_OK | os.X_OK):
        raise UsageError(f"--out-dir: {d} is not writable")
    return d


# --------------------------------------------------------------------------- progress


class ProgressView:
    """Progress of the worker on stderr: a rich bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, stream: Any = None, command: str = "envcheck run") -> None:
        self.total = total
        self.command = command
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self.start = time.monotonic()
        self._progress: Any = None
        self._task: Any = None
        self._group: str | None = None  # the group the last plain progress line named
        self._group_done = -1

    def __enter__(self) -> ProgressView:
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn(f"[bold]{self.command}[/]"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.fields[label]}"),
                                      console=Console(file=self.stream), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("bench", total=self.total, label="starting the worker")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, CaseStarted):
            if self._progress is not None:
                from rich.markup import escape

                self._progress.update(self._task, label=escape(ev.case.label))
            else:
                # The worker prepares every case of a group before any finishes: one line per
                # group, not one per case repeating the same count.
                group = ev.case.group_label
                if group == self._group and self.done == self._group_done:
                    return
                self._group, self._group_done = group, self.done
                k = min(self.done + 1, self.total)
                elapsed = time.monotonic() - self.start
                print(f"{self.command}: [{k}/{self.total}] {group} ({elapsed:.0f} s)", file=self.stream, flush=True)
        elif isinstance(ev, (Measured, Skipped)):
            self.done += 1
            if self._progress is not None:
                self._progress.update(self._task, completed=self.done)


def _say(text: str, stream: Any = None) -> None:
    print(f"envcheck run: {text}", file=stream if stream is not None else sys.stderr, flush=True)


# --------------------------------------------------------------------------- the run


def _utc(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def exit_status(report: Report, stopped: bool, node_problems: int = 0, analysis: Analysis | None = None) -> int:
    """See the module docstring: whether a case passed is the analysis's verdict (``analysis``: the
    report's, when the caller already has it)."""
    if stopped:
        return EXIT_INTERRUPTED
    if report.verdict == "fail" or node_problems:
        return EXIT_FAIL
    if not report.benches or any(not b.cases or b.partial for b in report.benches):
        return EXIT_FAIL
    from envcheck.analysis import analyse

    if any(r.status != "pass" for b in (analysis or analyse(report)).benches for r in b.results):
        return EXIT_FAIL
    return EXIT_OK


def fallback_dirs() -> list[Path]:
    """Where a finished run's JSON goes when ``--out-dir`` refuses it (full disk, read-only,
    gone): the user's state folder, then the system's temporary folder."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return [Path(state) / "envcheck" / "reports", Path(tempfile.gettempdir()) / "envcheck-reports"]


def save_json(report: Report, out_dir: Path, stem: str, stderr: Any = None) -> Path | None:
    """The report JSON under a fresh name in ``out_dir``, else in a fallback folder (and said so).
    None only when nowhere would take it; then the JSON goes to stdout, so a finished run is
    never lost. ``write_new`` leaves no temporary file behind on any failure."""
    content = model.dumps(report)
    tried: list[str] = []
    for folder in [out_dir, *fallback_dirs()]:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = reportname.write_report(folder, stem, content)
        except (OSError, model.ReportError) as e:
            tried.append(f"{folder} ({getattr(e, 'strerror', None) or e})")
            continue
        if folder != out_dir:
            _say(f"warning: could not write the report in {tried[0]}; saved it in {folder} instead", stderr)
        return path
    _say("error: the report could not be written anywhere (" + "; ".join(tried) + "); its JSON follows on "
         "stdout: save it with `envcheck run ... > report.json`", stderr)
    sys.stdout.write(content)
    sys.stdout.flush()
    return None


def write_outputs(report: Report, out_dir: Path, formats: Sequence[str], lang: str, when: datetime,
                  stderr: Any = None, analysis: Analysis | None = None) -> tuple[list[Path], bool]:
    """The JSON under a fresh dated name, then the requested renderings beside it, as a set (all
    or none). Returns what exists, and whether Ctrl-C stopped the rendering (the JSON is whole)."""
    bench = report.bench
    gpu = bench.device.name if bench is not None and bench.device.backend == "cuda" else None
    json_path = save_json(report, out_dir, reportname.report_stem(when, report.host, gpu), stderr)
    if json_path is None:
        return [], False
    written = [json_path]
    if not formats:
        return written, False
    from envcheck.render.writing import outcome_message, render_after_run

    outcome = render_after_run(report, json_path, formats, lang, analysis)
    written += outcome.written
    message = outcome_message(outcome, json_path, lang)
    if message:
        _say(message, stderr)
    return written, outcome.interrupted


def execute(args: argparse.Namespace, deps: Collaborators | None = None, stderr: Any = None,
            stdout: Any = None) -> int:
    """``envcheck run`` with its collaborators injectable (``main`` uses the real ones)."""
    formats = output_formats(args.format)
    suite.select(args)  # bad --ops/--sizes/--dtypes fail here, before the probes
    out_dir = output_dir(args.out_dir)
    key = None
    if getattr(args, "anonymize", False):
        from envcheck.anonymize import command_key

        key = command_key()  # before the run: a bad key must not cost a finished run
    deps = deps or collaborators()
    err_stream = stderr if stderr is not None else sys.stderr

    _say("probing the machine (PyTorch and Triton are tried in subprocesses)", err_stream)
    env = deps.collect(runtime=True, timeout=min(args.timeout, RUNTIME_PROBE_TIMEOUT_S), reports_dir=str(out_dir))
    checks = tuple(deps.evaluate(env))
    plan = suite.plan(args, env)

    when = datetime.now(timezone.utc)
    started = _utc(when)
    stopped = False
    sections: dict[str, Any] = {}
    problems = 0
    if getattr(args, "gpus", None):
        from envcheck.analysis.node import node_problems
        from envcheck.node.run import run_node_suite
        from envcheck.probes.collect import hostname

        host = hostname()
        if key is not None:  # the node's work folder sits beside the reports: no real host name in it
            from envcheck.anonymize import for_this_machine

            host = for_this_machine(host, key).host(host)
        stem = reportname.report_stem(when, host, None)
        _say(f"running the suite on GPUs {args.gpus} at once, then the node tests (Ctrl-C stops and keeps "
             "what finished)", err_stream)
        result = run_node_suite(args, env, work_dir=str(out_dir / f"{stem}_node"), worker_command=deps.worker_command)
        benches, checks, stopped = result.benches, checks + result.checks, result.interrupted
        sections["node"] = result.node
        problems = len(node_problems(result.node, result.benches))
    elif plan.runnable:
        where = f"GPU {plan.index}" if plan.backend == "cuda" else "the CPU"
        _say(f"running {len(plan.cases)} cases on {where} (Ctrl-C stops and keeps what finished)", err_stream)
        t0 = time.monotonic()
        with ProgressView(len(plan.cases), err_stream) as view:
            outcome = runner.run_worker(plan, view, args.timeout, command=deps.worker_command)
        benches = (assemble.assemble(plan, outcome, started, time.monotonic() - t0),)
        stopped = outcome.interrupted
        if outcome.stop is not None:
            stop = outcome.stop
            _say(f"stopped early ({stop.cause.value}{f', {stop.signal}' if stop.signal else ''}) after "
                 f"{stop.finished} of {stop.planned} cases", err_stream)
    else:
        benches = (assemble.no_bench(plan, started),)
        for note in plan.notes:
            _say(note.key, err_stream)

    report = deps.new_report("run", env, checks, benches=benches, **sections)
    if key is not None:
        from envcheck.anonymize import for_this_machine

        report = for_this_machine(report.host, key).report(report)
    from envcheck.analysis import analyse

    analysis = analyse(report)
    written, render_stopped = write_outputs(report, out_dir, formats, args.lang, when, err_stream, analysis)
    stopped = stopped or render_stopped

    from envcheck.render.terminal.console import make_console
    from envcheck.render.terminal.run import print_run

    print_run(make_console(stdout), report, analysis, written, args.lang)
    return exit_status(report, stopped, problems, analysis)


def main(args: argparse.Namespace) -> int:
    return execute(args)
