"""``envcheck probe``: facts about the machine, fast.

No torch import and no runtime subprocess: package metadata, /proc, NVML (in a child process)
and a few quick commands only, so it answers in a fraction of
``python -m torch.utils.collect_env``'s time and still works when importing torch would crash.
``--replay SNAPSHOT`` probes a machine recorded by ``envcheck snapshot`` instead, and says so.
"""

from __future__ import annotations

import sys

from envcheck.commands.options import ProbeOptions
from envcheck.errors import EXIT_OK


def main(o: ProbeOptions) -> int:
    from envcheck import model
    from envcheck.commands.check import replayed, seams
    from envcheck.probes.collect import collect, new_report
    from envcheck.render.escape import json_text

    s = seams(o.replay)
    env = collect(host=s.host, nvml=s.nvml, runtime=False)  # type: ignore[arg-type]
    report = replayed(new_report("probe", env, host=s.hostname), s)
    if o.format == "json":
        sys.stdout.write(json_text(model.dumps(report)))
        return EXIT_OK
    from envcheck.render.terminal.console import make_console
    from envcheck.render.terminal.environment import print_environment
    from envcheck.render.terminal.replay import print_replay_banner

    console = make_console()
    print_replay_banner(console, report.replayed_from)
    print_environment(console, env, replayed=report.replayed_from is not None)
    return EXIT_OK
