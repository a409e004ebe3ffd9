"""Xid events since boot from the kernel log (NVML's event API only sees Xids while a process listens): ``/dev/kmsg``,
``journalctl -k -b``, then ``dmesg``; each failure is a recorded reason, so "no Xids" is never "could not look"."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable

from envcheck.model.node import XidEvent, XidScan
from envcheck.probes.host import Host

# The driver prints (open-gpu-kernel-modules, src/nvidia/src/kernel/gpu/rc/kernel_rc.c):
#   NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s
# and on a MIG GPU "GPU-I:%02u GPU-CI:%02u" inside the parenthesis.
_XID = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^)]{0,256}\): (?P<xid>\d+)")
_BRACKET_TS = re.compile(r"^\[\s*(?P<ts>\d+\.\d+)\]")
_KMSG_RECORD = re.compile(r"^\d+,\d+,(?P<us>\d+),[^;]*;(?P<msg>.*)$")
MAX_LINE = 300

KmsgReader = Callable[[], str]


def read_kmsg(path: str = "/dev/kmsg") -> str:
    """Every record in the kernel ring buffer, one per line; raises OSError (EPERM when restricted). Read
    non-blocking until EAGAIN (it blocks at the end); EPIPE: a record was overwritten, go on from the next."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    records: list[str] = []
    try:
        while True:
            try:
                chunk = os.read(fd, 16384)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:
                    continue
                raise
            if not chunk:
                break
            records.append(chunk.decode("utf-8", errors="replace").rstrip("\n"))
    finally:
        os.close(fd)
    return "\n".join(records)


def parse_xids(text: str) -> tuple[XidEvent, ...]:
    """Xid events in kernel-log text: /dev/kmsg records, ``dmesg`` or ``journalctl -o short-monotonic`` lines."""
    out = []
    for raw in text.splitlines():
        m = _XID.search(raw)
        if not m:
            continue
        rec = _KMSG_RECORD.match(raw)
        if rec:
            ts: float | None = int(rec.group("us")) / 1e6
            line = rec.group("msg")
        else:
            b = _BRACKET_TS.match(raw)
            ts = float(b.group("ts")) if b else None
            line = raw[raw.index("NVRM:"):]
        out.append(XidEvent(int(m.group("xid")), m.group("pci").lower(), line.strip()[:MAX_LINE], ts))
    return tuple(out)


def scan_xids(host: Host, kmsg: KmsgReader | None = None, timeout: float = 10.0) -> XidScan:
    """Xids since boot from the first readable source. Never raises."""
    reasons: list[str] = []
    reader = kmsg if kmsg is not None else read_kmsg
    try:
        return XidScan("/dev/kmsg", parse_xids(reader()))
    except OSError as e:
        reasons.append(f"/dev/kmsg: {e.strerror or e}")
    for name, argv in (("journalctl -k", ["journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager", "-q"]),
                       ("dmesg", ["dmesg"])):
        r = host.run(argv, timeout=timeout)
        if r.ok and r.stdout.strip():
            return XidScan(name, parse_xids(r.stdout), tuple(reasons))
        reasons.append(r.describe() if not r.ok else f"{name}: no output (not permitted for this user?)")
    return XidScan(None, (), tuple(reasons))
