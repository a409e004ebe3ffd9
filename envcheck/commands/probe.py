"""``envcheck probe``: facts about the machine, fast.

No torch import and no runtime subprocess: package metadata, /proc, NVML (in a child process)
and a few quick commands only, so it answers in a fraction of
``python -m torch.utils.collect_env``'s time and still works when importing torch would crash.
``--replay SNAPSHOT`` probes a machine recorded by ``envcheck snapshot`` instead.
"""

from __future__ import annotations

import argparse
import sys

from envcheck.errors import EXIT_OK


def main(args: argparse.Namespace) -> int:
    from envcheck import model
    from envcheck.commands.check import seams
    from envcheck.probes.collect import collect, new_report

    host, nvml, hostname = seams(args)
    env = collect(host=host, nvml=nvml, runtime=False)  # type: ignore[arg-type]
    report = new_report("probe", env, host=hostname)
    if args.format == "json":
        sys.stdout.write(model.dumps(report))
        return EXIT_OK
    from envcheck.render.terminal.console import make_console
    from envcheck.render.terminal.environment import print_environment

    print_environment(make_console(), env)
    return EXIT_OK
