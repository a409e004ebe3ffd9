"""``envcheck run`` (the built-in suite) and ``envcheck bench`` (a user's ops): one pipeline. Validate, probe, plan,
measure in the isolated worker (progress on stderr), write the dated report and its renderings, print the summary.

Exit status: 0 every check passed or warned and every case passed; 1 a check or case failed, the worker crashed
or timed out (the partial report is written), nothing was measured, or a --burn / --crosscheck verdict failed;
130 Ctrl-C, SIGTERM or SIGHUP (the partial report is written first); 2 bad options or source (nothing is run)."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from envcheck import model, reportname
from envcheck.bench import runner, suite
from envcheck.bench.protocol import CaseStarted, Event, Measured, Skipped
from envcheck.commands import anonymize_key, say
from envcheck.commands.options import RunOptions
from envcheck.commands.publish import output_dir, output_formats, publish
from envcheck.errors import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError, one_line
from envcheck.model import Check, Environment, Report
from envcheck.model.crosscheck import Crosscheck
from envcheck.render.i18n import phrase, t, word

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from envcheck.analysis import Analysis
    from envcheck.crosscheck.tools import CrosscheckRun

RUNTIME_PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Collaborators:
    """The modules the pipeline drives; tests pass fakes (a scripted worker, a canned environment)."""

    collect: Callable[..., Environment]
    evaluate: Callable[[Environment], Sequence[Check]]
    new_report: Callable[..., Report]
    worker_command: Sequence[str] = runner.WORKER_COMMAND
    crosscheck: Callable[..., CrosscheckRun] | None = None  # --crosscheck (None: crosscheck/tools.py's)


def collaborators() -> Collaborators:
    """The real probes and checks: the one place they are imported."""
    from envcheck.checks import evaluate
    from envcheck.probes.collect import collect, new_report

    return Collaborators(collect=collect, evaluate=evaluate, new_report=new_report)


class ProgressView:
    """Progress of the worker on stderr: a rich bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, stream: TextIO, command: str = "envcheck run") -> None:
        self.total, self.stream, self.command = total, stream, command
        self.done = self.started = 0  # cases measured, and started (the plain progress lines' count)
        self.start = time.monotonic()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> ProgressView:
        if getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn(f"[bold]{self.command}[/]"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.fields[label]}"),
                                      console=Console(file=self.stream), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("bench", total=self.total, label=t("run.cli.starting_worker"))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, CaseStarted):
            if self._progress is not None:
                from rich.markup import escape

                self._progress.update(self._task, label=escape(ev.case.label))  # type: ignore[arg-type]
            else:  # counted as started: a group's cases are all prepared before any finishes
                self.started += 1
                k = min(self.started, self.total)
                elapsed = time.monotonic() - self.start
                print(f"{self.command}: [{k}/{self.total}] {ev.case.label} ({elapsed:.0f} s)", file=self.stream,
                      flush=True)
        elif isinstance(ev, (Measured, Skipped)):
            self.done += 1
            if self._progress is not None:
                self._progress.update(self._task, completed=self.done)  # type: ignore[arg-type]


def exit_status(analysis: Analysis, stopped: bool, node_problems: int = 0) -> int:
    """The module docstring's exit status; a case passes by ``analysis.verdict``, as JUnit and health say."""
    from envcheck.analysis.verdict import verdict

    if stopped:
        return EXIT_INTERRUPTED
    return EXIT_FAIL if node_problems or not verdict(analysis).ok else EXIT_OK


@dataclass(frozen=True)
class Cases:
    """Where a run's cases come from and how they are measured: the built-in suite or a user's ops."""

    plan: Callable[[Environment], suite.Plan]
    measure: Callable[[suite.Plan, runner.OnEvent, float, Sequence[str]], runner.BenchOutcome]


Say = Callable[[str], None]


def suite_cases(s: RunOptions) -> Callable[[Say], Cases]:
    """The built-in suite, its options checked now; ``--repeat`` passes run one after another in one limit."""
    suite.select(s)  # bad --ops/--sizes/--dtypes fail here, before the probes
    if s.repeat > 1 and s.gpus is not None:
        raise UsageError("error.repeat_gpus")

    def measure(plan: suite.Plan, on_event: runner.OnEvent, timeout: float,
                command: Sequence[str]) -> runner.BenchOutcome:
        if s.repeat == 1:
            return runner.run_worker(plan, on_event, timeout, command=command)
        deadline = time.monotonic() + timeout
        outcomes = []
        for _ in range(s.repeat):
            outcome = runner.run_worker(plan, on_event, max(deadline - time.monotonic(), 0.001), command=command)
            outcomes.append(outcome)
            if outcome.stop is not None:
                break
        return runner.merge(outcomes)

    cases = Cases(lambda env: suite.plan(s, env), measure)
    return lambda say: cases


def execute(s: RunOptions, deps: Collaborators | None = None, stderr: TextIO | None = None,
            stdout: TextIO | None = None,
            find: Callable[[Say], Cases] | None = None, command: str = "run") -> int:
    """The pipeline, its collaborators injectable; ``find`` gives the cases before anything is probed."""
    formats = output_formats(s.format)
    find = find or suite_cases(s)
    out_dir, key = output_dir(s.out_dir), anonymize_key(s.anonymize)  # before any work: a bad one costs nothing
    err_stream = stderr if stderr is not None else sys.stderr

    def progress(text: str) -> None:
        say(text, err_stream, command)

    source = find(progress)
    deps = deps or collaborators()

    progress(t("run.cli.probing"))
    env = deps.collect(runtime=True, timeout=min(s.timeout, RUNTIME_PROBE_TIMEOUT_S), reports_dir=str(out_dir))
    checks = tuple(deps.evaluate(env))
    plan = source.plan(env)

    when = datetime.now(timezone.utc)
    started = when.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    stopped = False
    sections: dict[str, object] = {}
    problems = 0
    node_work: Path | None = None
    gpus = s.gpus.pick(len(env.gpus)) if s.gpus is not None else (plan.index,)
    if s.gpus is not None:
        from envcheck.analysis.node import node_problems
        from envcheck.node.steps import run_node_suite
        from envcheck.probes.collect import hostname

        host = hostname()
        if key is not None:  # the node's work folder sits beside the reports: no real host name in it
            from envcheck.anonymize import for_this_machine

            host = for_this_machine(host, key).host(host)
        names = [str(env.gpus[i].get("name") or "gpu") for i in gpus]
        progress(t("run.cli.running_node", gpus=s.gpus))
        node_work = out_dir / f"{reportname.node_stem(when, host, names)}_work"
        result = run_node_suite(gpus, tuple(suite.plan(s, env, gpu=g) for g in gpus), str(node_work), s.timeout,
                                crosscheck=s.crosscheck, outlier_margin=s.outlier_margin,
                                worker_command=deps.worker_command)
        benches, checks, stopped = result.benches, checks + result.checks, result.interrupted
        sections["node"] = result.node
        problems = len(node_problems(result.node, result.benches))
    elif plan.runnable:
        where = t("run.cli.on_gpu", gpu=plan.index) if plan.backend == "cuda" else t("run.cli.on_cpu")
        of = t("run.cli.declared", count=len(plan.ops)) if plan.ops else ""
        times = t("run.cli.repeats", count=s.repeat) if s.repeat > 1 else ""
        progress(t("run.cli.running", count=len(plan.cases), of=of, where=where, times=times))
        t0 = time.monotonic()
        if s.repeat > 1:  # each repeat's settings, as the report records them
            from envcheck.bench.runner import pass_settings

            plan = dataclasses.replace(plan, settings=pass_settings(plan.settings, s.repeat))
        with ProgressView(len(plan.cases) * s.repeat, err_stream, f"envcheck {command}") as view:
            outcome = source.measure(plan, view, s.timeout, deps.worker_command)
        benches = (runner.assemble(plan, outcome, started, time.monotonic() - t0),)
        stopped = outcome.interrupted
        if outcome.stop is not None:
            stop = outcome.stop
            cause = word("stop_cause.", stop.cause.value) + (f", {stop.signal}" if stop.signal else "")
            progress(t("run.cli.stopped", cause=cause, finished=stop.finished, planned=stop.planned))
    else:
        benches = (runner.no_bench(plan, started),)
        for note in plan.notes:
            progress(phrase(note.key, note.params))

    if s.crosscheck and not stopped:
        from envcheck.crosscheck.tools import CrosscheckRun, run_crosscheck

        progress(t(f"run.cli.crosscheck{'.node' if node_work else ''}"))
        try:
            cross = (deps.crosscheck or run_crosscheck)(benches, sections.get("node"), node_work)
        except Exception as e:  # noqa: BLE001 - a bug of the cross-checks: a finding, never the finished run's loss
            from envcheck.analysis.crosscheck import CRASHED_NOTE

            cross = CrosscheckRun(Crosscheck(notes=(model.Note(CRASHED_NOTE, {"detail": one_line(e)}),)))
        sections["crosscheck"] = cross.crosscheck
        stopped = cross.stopped

    if s.burn and not stopped:
        from envcheck.commands.burn import burn_devices

        cpu = plan.backend == "cpu" and s.gpus is None  # no GPU: the CPU at tiny sizes
        progress(t(f"run.cli.burn{'.cpu' if cpu else ''}", minutes=f"{s.burn:g}", gpus=", ".join(map(str, gpus))))
        sections["burn"] = burn_devices(gpus, s.burn, cpu=cpu, stream=err_stream)
        stopped = sections["burn"].stopped is not None
    out = publish(deps.new_report("run", env, checks, benches=benches, **sections), key, out_dir, formats, when,
                  err_stream, stdout, command)
    analysis = out.analysis
    from envcheck.render.terminal.bench import print_run
    from envcheck.render.terminal.console import make_console

    console = make_console(out.stream)
    print_run(console, out.report, analysis, out.written)
    if analysis.crosscheck is not None:  # --crosscheck: the ratios and their bars (the verdict counts them)
        from envcheck.render.terminal.crosscheck import print_crosscheck

        print_crosscheck(console, analysis.crosscheck)
    if analysis.burn is not None:  # --burn: its verdicts too, and a GPU that failed them fails the run
        from envcheck.render.terminal.burn import print_burn

        print_burn(console, analysis.burn)
        problems += analysis.burn.verdict == "fail"
    return exit_status(analysis, stopped or out.stopped, problems)


main = execute
