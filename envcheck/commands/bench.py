"""``envcheck bench FILE.py`` (or ``module:object``): your own ops, measured and reported like
the built-in suite.

Steps: validate the options and the source argument; find the declared ops in a subprocess
(userbench/discover.py: a source that cannot be imported or declares nothing is one line,
exit 2); probe the machine as ``run`` does; plan every declared case (userbench/plan.py); run
them in the isolated worker, restarting it past a case that crashes or hangs (bench/resume.py);
write the dated report and its renderings, print the summary. From the plan on, everything is
``envcheck run``'s own code: the worker, the timer, the judge, the report, the analysis.

``--anonymize`` replaces what names the machine and its users, as for ``run``.

Exit status: as ``envcheck run`` (0 every check and case passed, 1 a check or case failed or
errored, 130 interrupted, 2 bad options or a bad source).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone
from typing import Any

from envcheck.bench import assemble
from envcheck.commands import run as run_command
from envcheck.commands.run import Collaborators, ProgressView, _utc, exit_status, summary_stream, write_outputs


def _say(text: str, stream: Any = None) -> None:
    print(f"envcheck bench: {text}", file=stream if stream is not None else sys.stderr, flush=True)


def execute(args: argparse.Namespace, deps: Collaborators | None = None, stderr: Any = None,
            stdout: Any = None) -> int:
    from envcheck.userbench import discover, plan

    formats = run_command.output_formats(args.format)
    source = discover.source_argument(args.source)
    out_dir = run_command.output_dir(args.out_dir)
    key = None
    if getattr(args, "anonymize", False):
        from envcheck.anonymize import command_key

        key = command_key()  # before any work: a bad key must not cost a finished run
    err_stream = stderr if stderr is not None else sys.stderr
    _say(f"reading the ops {args.source} declares (in a subprocess)", err_stream)
    ops = discover.discover(source)
    deps = deps or run_command.collaborators()
    _say("probing the machine (PyTorch and Triton are tried in subprocesses)", err_stream)
    env = deps.collect(runtime=True, timeout=min(args.timeout, run_command.RUNTIME_PROBE_TIMEOUT_S),
                       reports_dir=str(out_dir))
    checks = tuple(deps.evaluate(env))
    # The worker inherits this environment: TRITON_INTERPRET=1 runs a Triton kernel in its interpreter.
    the_plan = plan.plan(ops, source, args, env, interpret=os.environ.get("TRITON_INTERPRET") == "1")

    when = datetime.now(timezone.utc)
    started = _utc(when)
    stopped = False
    if the_plan.runnable:
        from envcheck.bench.resume import run_resuming

        where = f"GPU {the_plan.index}" if the_plan.backend == "cuda" else "the CPU"
        _say(f"running {len(the_plan.cases)} cases of {len(ops)} declared op(s) on {where} "
             "(Ctrl-C stops and keeps what finished)", err_stream)
        t0 = time.monotonic()
        with ProgressView(len(the_plan.cases), err_stream, "envcheck bench") as view:
            outcome = run_resuming(the_plan, view, args.timeout, args.case_timeout, command=deps.worker_command)
        bench = assemble.assemble(the_plan, outcome, started, time.monotonic() - t0)
        stopped = outcome.interrupted
    else:
        bench = assemble.no_bench(the_plan, started)
        for note in the_plan.notes:
            _say(note.key, err_stream)
    report = deps.new_report("run", env, checks, benches=(bench,))
    if key is not None:  # host, environment, checks and the bench with its declared ops
        from envcheck.anonymize import for_this_machine

        report = for_this_machine(report.host, key).report(report)
    from envcheck.analysis import analyse

    analysis = analyse(report)
    written, render_stopped = write_outputs(report, out_dir, formats, when, err_stream, analysis)
    from envcheck.render.terminal.console import make_console
    from envcheck.render.terminal.run import print_run

    print_run(make_console(summary_stream(written, stdout, err_stream)), report, analysis, written)
    return exit_status(report, stopped or render_stopped, 0, analysis)


def main(args: argparse.Namespace) -> int:
    return execute(args)
