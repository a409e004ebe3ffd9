"""NCCL's debug output (NCCL_DEBUG=INFO, subsystems TUNING and COLL): each call's algorithm and protocol, and the
version, as NCCL 2.28 prints them::

    vm:642:642 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f.. recvbuff 0x7f.. count 262144 datatype 7 op 0 \
root 0 comm 0x263eaad0 [nranks=2] stream (nil)
    vm:642:642 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}

The tuning line names no communicator: the COLL line before it in the same process does."""

from __future__ import annotations

import re

from envcheck.model.node import AlgoChoice

_PREFIX = r"^(?P<host>[^:\s]+):(?P<pid>\d+):(?P<tid>\d+) \[\d+\] NCCL INFO "
_ALGO = re.compile(_PREFIX + r"(?P<op>\w+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\S+) proto (?P<proto>\S+)"
                   r"(?: channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})?")
_COLL = re.compile(_PREFIX + r"(?P<op>\w+): opCount \S+ .*?comm (?P<comm>0x[0-9a-fA-F]+) \[nranks=(?P<nranks>\d+)\]")
_VERSION = re.compile(r"NCCL INFO NCCL version (?P<version>[0-9][^\s]*)")


def parse_choices(text: str, rank: int) -> tuple[AlgoChoice, ...]:
    """Every tuning decision in one rank's log, in order, each with its communicator when known."""
    last: dict[str, tuple[str, str, int]] = {}  # pid -> (op, comm, nranks) of its latest COLL line
    out: list[AlgoChoice] = []
    for line in text.splitlines():
        m = _COLL.match(line)
        if m:
            last[m.group("pid")] = (m.group("op"), m.group("comm"), int(m.group("nranks")))
            continue
        m = _ALGO.match(line)
        if not m:
            continue
        prev = last.get(m.group("pid"))
        same = prev is not None and prev[0] == m.group("op")
        out.append(AlgoChoice(
            rank=rank, nccl_op=m.group("op"), nccl_bytes=int(m.group("bytes")), algo=m.group("algo"),
            proto=m.group("proto"),
            channel_lo=int(m.group("lo")) if m.group("lo") else None,
            channel_hi=int(m.group("hi")) if m.group("hi") else None,
            nranks=prev[2] if same and prev else None, comm=prev[1] if same and prev else None,
        ))
    return tuple(out)


def distinct(choices: tuple[AlgoChoice, ...]) -> tuple[AlgoChoice, ...]:
    """One entry per (communicator size, op, bytes, algo, proto, channels): the log repeats each for every call."""
    seen: dict[tuple, AlgoChoice] = {}
    for c in choices:
        key = (c.rank, c.nranks, c.nccl_op, c.nccl_bytes, c.algo, c.proto, c.channel_lo, c.channel_hi)
        seen.setdefault(key, c)
    return tuple(seen.values())


def nccl_version(text: str) -> str | None:
    m = _VERSION.search(text)
    return m.group("version") if m else None
