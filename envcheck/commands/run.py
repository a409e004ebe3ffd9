"""``envcheck run``: probes, checks, the benchmark suite, a dated report, a terminal summary.

Steps: validate the options (before anything slow), probe the machine with the runtime
probes, evaluate the checks, plan the suite, run the isolated worker with progress on
stderr, write ``<out-dir>/<stamp>_<host>_<gpu-or-cpu>.json`` (never replacing a file) and
the Markdown / HTML beside it, then print the summary on stdout.

Exit status:
  0    every check passed or warned, and every measured case passed
  1    a check failed, a case failed numerically or could not run, the worker crashed or
       timed out (the partial report is still written), or nothing could be measured
  130  Ctrl-C during the benchmark (the partial report is written first)
  2    bad options (one line on stderr; nothing is run)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from envcheck import model, reportname
from envcheck.bench import runner, suite
from envcheck.errors import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError
from envcheck.model import Bench, BenchDevice, Check, Environment, Report

FORMATS = ("json", "md", "html")
RUNTIME_PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Collaborators:
    """The modules ``run`` drives; tests pass fakes (a scripted worker, a canned environment)."""

    collect: Callable[..., Environment]
    evaluate: Callable[[Environment], Sequence[Check]]
    new_report: Callable[..., Report]
    write_documents: Callable[..., list[Path]] | None
    worker_command: Sequence[str] = runner.WORKER_COMMAND


def collaborators() -> Collaborators:
    """The real probes, checks and renderers: the one place they are imported."""
    from envcheck.probes.collect import collect, new_report

    try:
        from envcheck.checks import evaluate
    except ImportError:  # checks not installed in this build: the report carries facts only
        def evaluate(env: Environment) -> tuple[Check, ...]:
            return ()
    try:
        from envcheck.render import write_documents
    except ImportError:
        write_documents = None
    return Collaborators(collect=collect, evaluate=evaluate, new_report=new_report, write_documents=write_documents)


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

    def __init__(self, total: int, stream: Any = None) -> None:
        self.total = total
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

            self._progress = Progress(TextColumn("[bold]envcheck run[/]"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.fields[label]}"),
                                      console=Console(file=self.stream), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("bench", total=self.total, label="starting the worker")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind == "case_start":
            label = str(ev.get("label", ""))
            if self._progress is not None:
                from rich.markup import escape

                self._progress.update(self._task, label=escape(label))
            else:
                # The worker prepares every case of a group (same label but the last word, the
                # implementation) before any finishes: one line per group, not one per case
                # repeating the same count.
                group = label.rsplit(" ", 1)[0]
                if group == self._group and self.done == self._group_done:
                    return
                self._group, self._group_done = group, self.done
                k = min(self.done + 1, self.total)
                elapsed = time.monotonic() - self.start
                print(f"envcheck run: [{k}/{self.total}] {group} ({elapsed:.0f} s)", file=self.stream, flush=True)
        elif kind in ("case", "skip"):
            self.done += 1
            if self._progress is not None:
                self._progress.update(self._task, completed=self.done)


def _say(text: str, stream: Any = None) -> None:
    print(f"envcheck run: {text}", file=stream if stream is not None else sys.stderr, flush=True)


# --------------------------------------------------------------------------- the run


def _utc(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def no_bench(plan: suite.Plan, env: Environment, started: str) -> Bench:
    """The Bench of a run where nothing could be measured: the reason, and no cases."""
    cpu = env.get("system", "cpu_model")
    return Bench(device=BenchDevice(backend="cpu", name=str(cpu) if cpu else "CPU"),
                 settings={**plan.settings, **plan.recorded}, skipped=plan.skips, notes=plan.notes,
                 started=started, duration_s=0.0)


def exit_status(report: Report, outcome: runner.BenchOutcome | None) -> int:
    """See the module docstring."""
    if outcome is not None and outcome.by_user:
        return EXIT_INTERRUPTED
    if report.verdict == "fail":
        return EXIT_FAIL
    bench = report.bench
    if bench is None or not bench.cases or bench.partial:
        return EXIT_FAIL
    if any(c.status in ("fail", "error") for c in bench.cases):
        return EXIT_FAIL
    return EXIT_OK


def write_outputs(report: Report, out_dir: Path, formats: Sequence[str], lang: str, when: datetime,
                  write_documents: Callable[..., list[Path]] | None, stderr: Any = None) -> list[Path]:
    """The JSON under a fresh dated name, then the requested renderings beside it."""
    bench = report.bench
    gpu = bench.device.name if bench is not None and bench.device.backend == "cuda" else None
    stem = reportname.report_stem(when, report.host, gpu)
    json_path = reportname.write_report(out_dir, stem, model.dumps(report))
    written = [json_path]
    if formats:
        if write_documents is None:
            _say("warning: Markdown/HTML not written (the renderer is not available in this install)", stderr)
        else:
            try:
                written += list(write_documents(report, json_path, formats, lang=lang))
            except Exception as e:  # noqa: BLE001 -- the JSON is the report; a rendering bug must not lose the run
                _say(f"warning: {'/'.join(formats)} not written ({type(e).__name__}: {e}); "
                     f"retry with: envcheck render {json_path}", stderr)
    return written


def execute(args: argparse.Namespace, deps: Collaborators | None = None, stderr: Any = None,
            stdout: Any = None) -> int:
    """``envcheck run`` with its collaborators injectable (``main`` uses the real ones)."""
    formats = output_formats(args.format)
    suite.select(args)  # bad --ops/--sizes/--dtypes fail here, before the probes
    out_dir = output_dir(args.out_dir)
    deps = deps or collaborators()
    err_stream = stderr if stderr is not None else sys.stderr

    _say("probing the machine (PyTorch and Triton are tried in subprocesses)", err_stream)
    env = deps.collect(runtime=True, timeout=min(args.timeout, RUNTIME_PROBE_TIMEOUT_S), reports_dir=str(out_dir))
    checks = tuple(deps.evaluate(env))
    plan = suite.plan(args, env)

    when = datetime.now(timezone.utc)
    started = _utc(when)
    outcome: runner.BenchOutcome | None = None
    if plan.runnable:
        where = f"GPU {plan.index}" if plan.device == "cuda" else "the CPU"
        _say(f"running {len(plan.cases)} cases on {where} (Ctrl-C stops and keeps what finished)", err_stream)
        t0 = time.monotonic()
        with ProgressView(len(plan.cases), err_stream) as view:
            outcome = runner.run_worker(plan, view, args.timeout, command=deps.worker_command)
        bench = runner.assemble(plan, outcome, started, time.monotonic() - t0)
        if outcome.interrupted:
            _say(outcome.interrupted, err_stream)
    else:
        bench = no_bench(plan, env, started)
        for note in plan.notes:
            _say(note, err_stream)

    report = deps.new_report("run", env, checks, bench)
    written = write_outputs(report, out_dir, formats, args.lang, when, deps.write_documents, err_stream)

    from envcheck.analysis import analyse
    from envcheck.render.terminal.console import make_console
    from envcheck.render.terminal.run import print_run

    print_run(make_console(stdout), report, analyse(report), written, args.lang)
    return exit_status(report, outcome)


def main(args: argparse.Namespace) -> int:
    return execute(args)
