"""``envcheck bench FILE.py`` (or ``module:object``): a user's ops as the cases of ``run``'s pipeline, the source
imported only in children; a case that crashes or hangs fails alone (bench/runner.py)."""

from __future__ import annotations

import os
from typing import TextIO

from envcheck.commands import run
from envcheck.commands.options import BenchOptions, RunOptions
from envcheck.render.i18n import t


def execute(s: BenchOptions, deps: run.Collaborators | None = None, stderr: TextIO | None = None,
            stdout: TextIO | None = None) -> int:
    from envcheck.bench.runner import run_resuming
    from envcheck.userbench import discover

    source = discover.source_argument(s.source)

    def find(say: run.Say) -> run.Cases:
        say(t("bench.cli.reading", source=s.source))
        ops = discover.discover(source)
        interpret = os.environ.get("TRITON_INTERPRET") == "1"  # the worker inherits it: Triton runs interpreted
        return run.Cases(lambda env: discover.plan(ops, source, s.quick, s.device, env, interpret=interpret),
                         lambda p, on_event, timeout, command: run_resuming(p, on_event, timeout, s.case_timeout,
                                                                            command=command))

    options = RunOptions(quick=s.quick, device=s.device, out_dir=s.out_dir, format=s.format, timeout=s.timeout,
                         anonymize=s.anonymize, lang=s.lang)
    return run.execute(options, deps, stderr, stdout, find, "bench")


main = execute
