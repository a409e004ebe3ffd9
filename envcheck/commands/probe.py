"""``envcheck probe``: facts about the machine, fast.

No torch import and no runtime subprocess: package metadata, /proc, NVML (in a child process)
and a few quick commands only, so it answers in a fraction of
``python -m torch.utils.collect_env``'s time and still works when importing torch would crash.
``--replay SNAPSHOT`` probes a machine recorded by ``envcheck snapshot`` instead, and says so.
"""

from __future__ import annotations

from envcheck.commands.options import CheckOptions, ProbeOptions


def main(o: ProbeOptions) -> int:
    from envcheck.commands import check

    return check.main(CheckOptions(format=o.format, replay=o.replay), probe=True)
