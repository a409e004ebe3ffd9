"""``envcheck run``: probes, checks, the benchmark suite, a dated report, a terminal summary.

Steps: validate the options (before anything slow), probe the machine with the runtime
probes, evaluate the checks, plan the suite, run the isolated worker with progress on
stderr, write ``<out-dir>/<stamp>_<host>_<gpu-or-cpu>.json`` (never replacing a file) and
the Markdown / HTML beside it, then print the summary on stdout.

Exit status:
  0    every check passed or warned, and every measured case passed
  1    a check failed, a case failed numerically or could not run, the worker crashed or
       timed out (the partial report is still written), nothing could be measured, (--burn)
       a GPU failed the burn-in, or (--crosscheck) a number lay outside its bar against an
       independent tool, or a tool failed or hung
  130  Ctrl-C, SIGTERM or SIGHUP during the benchmark (the partial report is written first)
  2    bad options (one line on stderr; nothing is run)
"""

from __future__ import annotations

import argparse
import dataclasses
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
    from envcheck.crosscheck.run import CrosscheckRun

FORMATS = ("json", "md", "html", "junit", "prometheus")
RUNTIME_PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Collaborators:
    """The modules ``run`` drives; tests pass fakes (a scripted worker, a canned environment)."""

    collect: Callable[..., Environment]
    evaluate: Callable[[Environment], Sequence[Check]]
    new_report: Callable[..., Report]
    worker_command: Sequence[str] = runner.WORKER_COMMAND
    crosscheck: Callable[..., CrosscheckRun] | None = None  # --crosscheck (None: crosscheck/run.py's)


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


def output_dir(text: str | None) -> Path:
    """``--out-dir`` (else the user's reports folder: userdirs.py), made and checked writable before a long run;
    every command that writes a dated report resolves its folder here."""
    from envcheck.userdirs import out_dir as default_out_dir

    d = Path(default_out_dir(text)).expanduser()
    try:
        if d.exists() and not d.is_dir():
            raise UsageError(f"--out-dir: {d} is a file, not a folder")
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a name the file system refuses (too long) as much as a folder it refuses
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
        self.started = 0  # cases started: the plain progress lines' count

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
            else:  # counted as started: a group's cases are all prepared before any finishes
                self.started += 1
                k = min(self.started, self.total)
                elapsed = time.monotonic() - self.start
                print(f"{self.command}: [{k}/{self.total}] {ev.case.label} ({elapsed:.0f} s)", file=self.stream,
                      flush=True)
        elif isinstance(ev, (Measured, Skipped)):
            self.done += 1
            if self._progress is not None:
                self._progress.update(self._task, completed=self.done)


def _say(text: str, stream: Any = None, command: str = "run") -> None:
    print(f"envcheck {command}: {text}", file=stream if stream is not None else sys.stderr, flush=True)


# --------------------------------------------------------------------------- the run


def _utc(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def exit_status(report: Report, stopped: bool, node_problems: int = 0, analysis: Analysis | None = None) -> int:
    """The module docstring's exit status; whether a case passed is the analysis's verdict."""
    if stopped:
        return EXIT_INTERRUPTED
    if node_problems:
        return EXIT_FAIL
    from envcheck.analysis import analyse
    from envcheck.analysis.verdict import verdict

    # The same verdict the JUnit, Prometheus and health outputs give (analysis/verdict.py).
    return EXIT_OK if verdict(analysis or analyse(report)).ok else EXIT_FAIL


def fallback_dirs() -> list[Path]:
    """Where a finished run's JSON goes when ``--out-dir`` refuses it: the user's state folder, then the
    temporary folder, each once ``destination.private_folder`` made or verified it as the user's own."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return [Path(state) / "envcheck" / "reports", Path(tempfile.gettempdir()) / "envcheck-reports"]


def save_json(report: Report, out_dir: Path, stem: str, stderr: Any = None, command: str = "run") -> Path | None:
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
            _say(f"warning: could not write the report in {tried[0]}; saved it in {path.parent} instead"
                 + (f" (skipped: {'; '.join(tried[1:])})" if len(tried) > 1 else ""), stderr, command)
        return path
    _say("error: the report could not be written anywhere (" + "; ".join(tried) + "); its JSON follows on "
         f"stdout: save it with `envcheck {command} ... > report.json`", stderr, command)
    sys.stdout.write(content)
    sys.stdout.flush()
    return None


def summary_stream(written: Sequence[Path], stdout: Any, stderr: Any) -> Any:
    """Where the terminal summary goes: ``stdout``, unless the report's JSON went there (nothing written):
    then ``stderr``, so what a user saves from stdout is the JSON alone."""
    if written:
        return stdout
    return stderr if stderr is not None else sys.stderr


def write_outputs(report: Report, out_dir: Path, formats: Sequence[str], lang: str, when: datetime,
                  stderr: Any = None, analysis: Analysis | None = None) -> tuple[list[Path], bool]:
    """The JSON under a fresh dated name, then the renderings beside it (all or none); what exists, and
    whether Ctrl-C stopped the rendering (the JSON is whole)."""
    bench = report.bench
    gpu = bench.device.name if bench is not None and bench.device.backend == "cuda" else None
    stem = (reportname.node_stem(when, report.host, [b.device.name for b in report.benches]) if report.node is not None
            else reportname.report_stem(when, report.host, gpu))
    json_path = save_json(report, out_dir, stem, stderr)
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


def _run_repeats(plan: suite.Plan, view: ProgressView, timeout: float, repeats: int,
                 command: Sequence[str]) -> runner.BenchOutcome:
    """The worker on ``plan`` ``repeats`` times, one pass after another within one time limit (bench/repeat.py);
    a stop ends the repeats and keeps what finished."""
    if repeats == 1:
        return runner.run_worker(plan, view, timeout, command=command)
    from envcheck.bench import repeat

    deadline = time.monotonic() + timeout
    outcomes = []
    for _ in range(repeats):
        outcome = runner.run_worker(plan, view, max(deadline - time.monotonic(), 0.001), command=command)
        outcomes.append(outcome)
        if outcome.stop is not None:
            break
    return repeat.merge(outcomes)


def execute(args: argparse.Namespace, deps: Collaborators | None = None, stderr: Any = None,
            stdout: Any = None) -> int:
    """``envcheck run`` with its collaborators injectable (``main`` uses the real ones)."""
    formats = output_formats(args.format)
    suite.select(args)  # bad --ops/--sizes/--dtypes fail here, before the probes
    repeats = getattr(args, "repeat", 1) or 1
    if repeats > 1 and getattr(args, "gpus", None):
        raise UsageError("--repeat runs one GPU's suite N times; it cannot be combined with --gpus")
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
    node_work: Path | None = None
    if getattr(args, "gpus", None):
        from envcheck.analysis.node import node_problems
        from envcheck.node.run import run_node_suite
        from envcheck.probes.collect import hostname

        host = hostname()
        if key is not None:  # the node's work folder sits beside the reports: no real host name in it
            from envcheck.anonymize import for_this_machine

            host = for_this_machine(host, key).host(host)
        from envcheck.commands.burning import select_gpus

        names = [str(env.gpus[i].get("name") or "gpu") for i in select_gpus(args.gpus, env)]
        _say(f"running the suite on GPUs {args.gpus} at once, then the node tests (Ctrl-C stops and keeps "
             "what finished)", err_stream)
        node_work = out_dir / f"{reportname.node_stem(when, host, names)}_work"
        result = run_node_suite(args, env, work_dir=str(node_work), worker_command=deps.worker_command)
        benches, checks, stopped = result.benches, checks + result.checks, result.interrupted
        sections["node"] = result.node
        problems = len(node_problems(result.node, result.benches))
    elif plan.runnable:
        where = f"GPU {plan.index}" if plan.backend == "cuda" else "the CPU"
        times = f", {repeats} independent repeats" if repeats > 1 else ""
        _say(f"running {len(plan.cases)} cases on {where}{times} (Ctrl-C stops and keeps what finished)", err_stream)
        t0 = time.monotonic()
        if repeats > 1:  # each repeat's settings, as the report records them
            from envcheck.bench.repeat import pass_settings

            plan = dataclasses.replace(plan, settings=pass_settings(plan.settings, repeats))
        with ProgressView(len(plan.cases) * repeats, err_stream) as view:
            outcome = _run_repeats(plan, view, args.timeout, repeats, deps.worker_command)
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

    if getattr(args, "crosscheck", False) and not stopped:
        from envcheck.crosscheck.run import run_crosscheck

        _say("cross-checks: the same work timed again by independent tools (do_bench_cudagraph"
             + (", a plain torch copy and torch.distributed loop, nccl-tests where found)" if node_work else ")"),
             err_stream)
        try:
            cross = (deps.crosscheck or run_crosscheck)(benches, sections.get("node"), node_work)
        except Exception as e:  # noqa: BLE001 - a bug of the cross-checks: a finding, never the finished run's loss
            from envcheck.analysis.crosscheck import CRASHED_NOTE
            from envcheck.crosscheck.run import CrosscheckRun
            from envcheck.model.crosscheck import Crosscheck

            cross = CrosscheckRun(Crosscheck(notes=(model.Note(CRASHED_NOTE, {"detail": f"{type(e).__name__}: {e}"
                                                                                .splitlines()[0][:300]}),)))
        sections["crosscheck"] = cross.crosscheck
        stopped = cross.stopped

    if getattr(args, "burn", None) and not stopped:
        from envcheck.commands.burning import burn_devices, select_gpus

        cpu = plan.backend == "cpu" and not getattr(args, "gpus", None)  # no GPU: the CPU at tiny sizes
        gpus = select_gpus(args.gpus, env) if getattr(args, "gpus", None) else (plan.index or 0,)
        _say(f"burn-in: {args.burn:g} min on {'the CPU' if cpu else 'GPU(s) ' + ', '.join(map(str, gpus))}",
             err_stream)
        sections["burn"] = burn_devices(gpus, args.burn, cpu=cpu, stream=err_stream)
        stopped = sections["burn"].stopped is not None
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

    console = make_console(summary_stream(written, stdout, err_stream))
    print_run(console, report, analysis, written, args.lang)
    if analysis.crosscheck is not None:  # --crosscheck: the ratios and their bars (the verdict counts them)
        from envcheck.render.terminal.crosscheck import print_crosscheck

        print_crosscheck(console, analysis.crosscheck, args.lang)
    if analysis.burn is not None:  # --burn: its verdicts too, and a GPU that failed them fails the run
        from envcheck.render.terminal.burn import print_burn

        print_burn(console, analysis.burn, (), args.lang)
        problems += analysis.burn.verdict == "fail"
    return exit_status(report, stopped, problems, analysis)


def main(args: argparse.Namespace) -> int:
    return execute(args)
