"""Error counters of one node: deltas over the node tests, rates since boot, DCGM's limits."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.model.node import CounterSnapshot

# --------------------------------------------------------------------------- error counters

# DCGM's hardware limits (dcgm_gpu_hardware_limits.h): "8 replays per minute is the maximum
# recommended by RM"; "RM has informed us that CRC errors only matter at rates of 100+ per second".
PCIE_REPLAY_PER_MIN_LIMIT = 8.0
NVLINK_CRC_PER_S_LIMIT = 100.0
# Counters judged as CRC-like rates: a replay resends a flit whose CRC failed, and link ECC corrects
# what CRC would have flagged, so both follow the CRC rate on a link that is otherwise healthy.
RATE_COUNTERS = ("crc_flit", "crc_data", "replay", "ecc_data")


@dataclass(frozen=True)
class CounterChange:
    """One counter over an interval: how much it grew and how fast."""

    gpu: int
    name: str
    link: int | None
    delta: int
    interval_s: float
    per_s: float


def counter_interval_s(before: CounterSnapshot | None, after: CounterSnapshot | None) -> float | None:
    """Seconds between two readings from their uptimes; None when unknown (a reboot between them)."""
    if before is None or after is None or before.uptime_s is None or after.uptime_s is None:
        return None
    return after.uptime_s - before.uptime_s if after.uptime_s > before.uptime_s else None


def counter_deltas(before: CounterSnapshot, after: CounterSnapshot) -> tuple[CounterChange, ...]:
    """Growth of each counter read in both snapshots (a counter that went down was reset: skipped)."""
    interval = counter_interval_s(before, after)
    if interval is None:
        return ()
    old = {(c.gpu, c.name, c.link): c.value for c in before.counters if c.value is not None}
    out = []
    for c in after.counters:
        prev = old.get((c.gpu, c.name, c.link))
        if c.value is None or prev is None or c.value < prev:
            continue
        d = c.value - prev
        out.append(CounterChange(c.gpu, c.name, c.link, d, interval, d / interval))
    return tuple(out)


def counter_rates(snapshot: CounterSnapshot) -> tuple[CounterChange, ...]:
    """Each counter as a rate since boot (NVML's start at zero when the driver loads: on a server, at boot)."""
    if snapshot.uptime_s is None or snapshot.uptime_s <= 0:
        return ()
    return tuple(CounterChange(c.gpu, c.name, c.link, c.value, snapshot.uptime_s, c.value / snapshot.uptime_s)
                 for c in snapshot.counters if c.value is not None)


def counter_over_limit(change: CounterChange) -> bool:
    """Whether a counter's rate is past the limit DCGM uses for it (recovery: any at all)."""
    if change.name in ("pcie_replay", "pcie_replay_rollover"):
        return change.per_s * 60 > PCIE_REPLAY_PER_MIN_LIMIT
    if change.name == "recovery":
        return change.delta > 0
    if change.name in RATE_COUNTERS:
        return change.per_s > NVLINK_CRC_PER_S_LIMIT
    return False


# --------------------------------------------------------------------------- a node, analysed once

COUNTER_ORDER = ("pcie_replay", "pcie_replay_rollover", *("replay", "recovery", "crc_flit", "crc_data", "ecc_data"))


@dataclass(frozen=True)
class CounterRow:
    """One error counter of one GPU summed over its links: its growth over the node tests (``delta``, ``per_s``)
    and since boot; ``over_limit``: a link's growth is past DCGM's limit (``boot_over_limit``: since boot)."""

    gpu: int
    name: str
    links: int
    before: int | None
    after: int | None
    delta: int | None
    per_s: float | None
    boot_per_s: float | None
    over_limit: bool
    boot_over_limit: bool


@dataclass(frozen=True)
class UnreadCounter:
    gpu: int
    name: str
    link: int | None
    reason: str


def counter_rows(before: CounterSnapshot | None, after: CounterSnapshot | None
                 ) -> tuple[tuple[CounterRow, ...], tuple[CounterChange, ...], tuple[UnreadCounter, ...]]:
    """Per GPU and counter the totals and rates, the changes past their limit, the unread counters."""
    last = after or before
    if last is None:
        return (), (), ()

    def totals(snap: CounterSnapshot | None) -> dict[tuple[int, str], int]:
        out: dict[tuple[int, str], int] = {}
        for c in (snap.counters if snap else ()):
            if c.value is not None:
                out[(c.gpu, c.name)] = out.get((c.gpu, c.name), 0) + c.value
        return out

    b, a = totals(before), totals(after)
    changes = counter_deltas(before, after) if before is not None and after is not None else ()
    boot = counter_rates(last)
    keys = sorted({(c.gpu, c.name) for c in last.counters if c.value is not None},
                  key=lambda k: (k[0], COUNTER_ORDER.index(k[1]) if k[1] in COUNTER_ORDER else 99, k[1]))
    rows = []
    for gpu, name in keys:
        mine = [c for c in changes if (c.gpu, c.name) == (gpu, name)]
        booted = [c for c in boot if (c.gpu, c.name) == (gpu, name)]
        delta = sum(c.delta for c in mine) if mine else None
        interval = mine[0].interval_s if mine else None
        rows.append(CounterRow(
            gpu, name, sum(1 for c in last.counters if (c.gpu, c.name) == (gpu, name) and c.value is not None),
            b.get((gpu, name)), a.get((gpu, name)), delta,
            delta / interval if delta is not None and interval else None,
            sum(c.per_s for c in booted) if booted else None,
            any(counter_over_limit(c) for c in mine), any(counter_over_limit(c) for c in booted)))
    unread = tuple(UnreadCounter(c.gpu, c.name, c.link, c.reason or "") for c in last.counters if c.value is None)
    return tuple(rows), tuple(c for c in changes if counter_over_limit(c)), unread
