"""The ``links`` section (PCIe replays, NVLink errors, row remapping, Xid events) read in a child, as NVML may crash
or hang: a crash or hang becomes the section's ``error`` fact. Only ``check`` and ``run`` read it."""

from __future__ import annotations

from typing import Any

from envcheck.model import Fact, Facts, build, missing
from envcheck.probes import isolate
from envcheck.probes.host import Host

SECTION = "links"


def child(args: object, out: Any) -> None:
    from envcheck.model import to_dict
    from envcheck.probes.link_counters import probe_links

    out({"facts": to_dict(probe_links())})


def probe_links_isolated(host: Host, timeout: float) -> Facts:
    """The ``links`` section from a child; ``error`` holds what went wrong when it did not report."""
    iso = isolate.run_python(host, "envcheck.probes.links_probe:child", timeout, SECTION)
    raw = (iso.data or {}).get("facts")
    if isinstance(raw, dict):
        try:
            return {str(k): build(Fact, v, f"links.{k}") for k, v in raw.items()}
        except ValueError as e:
            return {"error": missing(f"the links probe answered something unreadable: {e}")}
    return {"error": missing(iso.error or "the links probe reported nothing")}


def not_run(reason: str = isolate.NOT_RUN) -> Facts:
    return {"error": missing(reason)}
