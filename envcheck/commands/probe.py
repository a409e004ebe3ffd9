"""``envcheck probe``: facts about the machine, fast: check's pipeline without torch, runtime probes or checks,
so it works when importing torch would crash.
"""

from __future__ import annotations

from envcheck.commands.options import CheckOptions, ProbeOptions


def main(o: ProbeOptions) -> int:
    from envcheck.commands import check

    return check.main(CheckOptions(format=o.format, replay=o.replay), probe=True)
