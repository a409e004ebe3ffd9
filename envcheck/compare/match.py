"""Pairing the cases of two runs on their key (a pair that may not be compared is kept with its reasons), and the
nodes of two fleets by who they are."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.analysis import CaseResult
from envcheck.model import CaseKey, Note, Settings, Timing

# Reason keys (the presentation's catalogue phrases them).
FAILED = "compare.failed"  # side, stage, detail
PRECISION_DIFFERS = "compare.precision_differs"  # baseline, other
NO_COMMON_TIMING = "compare.no_common_timing"  # baseline, other: the methods each side has
METHODS_DIFFER = "compare.methods_differ"  # baseline, other
THROTTLED = "compare.throttled"  # side, reasons (NVML names)
SETTINGS_DIFFER = "compare.settings_differ"  # names: the run settings that measure differently

# The run settings that change how every case is sampled: a median of 20 samples after 20 ms of warm-up is not
# the median of 200 after 50 ms, so runs that differ here are not compared row by row.
SAMPLING = ("quick", "warmup_ms", "rep_ms", "min_samples", "max_samples", "cold_l2", "threads")

LooseKey = tuple[str, str, str, tuple[int, ...]]


@dataclass(frozen=True)
class Matching:
    """Results of two runs paired on the same key; ``precision_pairs`` differ in precision only (listed)."""

    pairs: tuple[tuple[CaseResult, CaseResult], ...]
    precision_pairs: tuple[tuple[CaseResult, CaseResult], ...]
    only_base: tuple[CaseResult, ...]
    only_other: tuple[CaseResult, ...]


def _first_by_key(results: tuple[CaseResult, ...]) -> dict[CaseKey, CaseResult]:
    # A bench holds one case per key; if one ever repeats a key, the first measured is compared.
    out: dict[CaseKey, CaseResult] = {}
    for r in results:
        out.setdefault(r.key, r)
    return out


def _loose(r: CaseResult) -> LooseKey:
    c = r.case
    return (c.op, c.impl, c.dtype, c.shape)


def match(base: tuple[CaseResult, ...], other: tuple[CaseResult, ...]) -> Matching:
    """Pair the results of two runs (either may be empty), in time linear in the number of cases."""
    a = _first_by_key(base)
    b = _first_by_key(other)
    pairs = tuple((a[k], b[k]) for k in a if k in b)
    rest_b = [r for k, r in b.items() if k not in a]
    by_loose_b: dict[LooseKey, CaseResult] = {}
    for r in rest_b:
        by_loose_b.setdefault(_loose(r), r)
    precision_pairs = []
    used_b: set[CaseKey] = set()
    only_a = []
    for k, r in a.items():
        if k in b:
            continue
        d = by_loose_b.get(_loose(r))
        if d is not None and d.key not in used_b:
            precision_pairs.append((r, d))
            used_b.add(d.key)
        else:
            only_a.append(r)
    only_b = [r for r in rest_b if r.key not in used_b]
    return Matching(pairs, tuple(precision_pairs), tuple(only_a), tuple(only_b))


def timings(a: CaseResult, b: CaseResult) -> tuple[str | None, Timing | None, Timing | None, list[Note]]:
    """Which timing the pair is compared on (``gpu`` when both have it, else ``launch``), the two timings, and
    why the pair cannot be compared: timings of different methods measure different things, never mixed."""
    reasons = [Note(FAILED, {"side": side, "stage": r.case.failure.stage, "detail": r.case.failure.detail})
               for side, r in (("baseline", a), ("other", b)) if r.case.failure is not None]
    if reasons:
        return None, None, None, reasons
    ca, cb = a.case, b.case
    if ca.gpu and cb.gpu:
        which, ta, tb = "gpu", ca.gpu, cb.gpu
    elif ca.launch and cb.launch:
        which, ta, tb = "launch", ca.launch, cb.launch
    else:
        ma = ca.best_time.method if ca.best_time else None
        mb = cb.best_time.method if cb.best_time else None
        return None, None, None, [Note(NO_COMMON_TIMING, {"baseline": ma, "other": mb})]
    if ta.method != tb.method:
        reasons.append(Note(METHODS_DIFFER, {"baseline": ta.method, "other": tb.method}))
    return which, ta, tb, reasons


def settings_differ(a: Settings | None, b: Settings | None) -> tuple[str, ...]:
    """The sampling settings (``SAMPLING``) two runs differ in; empty when their rows may be compared."""
    if a is None or b is None:
        return ()
    return tuple(name for name in SAMPLING if getattr(a, name) != getattr(b, name))


def comparability(a: CaseResult, b: CaseResult) -> list[Note]:
    """Reasons a paired (baseline, other) case must not be compared; empty when it may be."""
    reasons: list[Note] = []
    if a.case.precision != b.case.precision:
        reasons.append(Note(PRECISION_DIFFERS, {"baseline": a.case.precision, "other": b.case.precision}))
    ca, cb = a.conditions, b.conditions
    # Both sides at their power cap is a GPU's normal state under full tensor-core load: the pair compares what
    # each delivers at its rated power. Other throttling, or on one side only, means a side ran below its best.
    both_capped = ca is not None and cb is not None and ca.power_capped_only and cb.power_capped_only
    if not both_capped:
        for side, c in (("baseline", ca), ("other", cb)):
            if c is not None and c.throttled:
                reasons.append(Note(THROTTLED, {"side": side, "reasons": tuple(c.reasons)}))
    reasons.extend(timings(a, b)[3])
    return reasons


# Why a node has no partner (``Unmatched.reason``).
NO_PARTNER = "compare.node_unmatched"  # side: no node of the other side has its host or its GPUs
# How a pair of nodes was matched (``NodePair.by``).
BY_IDENTITY = "identity"  # same host and same GPU UUIDs
BY_GPUS = "gpus"  # same GPU UUIDs under another host name
BY_NAME = "name"  # same node name in its fleet (``host`` or ``host/N``), other GPUs
BY_HOST = "host"  # same host, other GPUs (or GPUs without UUIDs)


@dataclass(frozen=True)
class NodeId:
    """Who a node is: its machine's host name (not a simulated node's ``host/N``) and its GPUs' UUIDs."""

    label: str
    host: str
    uuids: frozenset[str]
    name: str = ""  # the node's name in its fleet: its host, or ``host/N`` for nodes sharing one


@dataclass(frozen=True)
class Unmatched:
    """A node of one side that no node of the other side matches: listed, never compared."""

    label: str
    side: str  # baseline | other
    host: str
    uuids: tuple[str, ...]
    reason: str = NO_PARTNER


@dataclass(frozen=True)
class NodePair:
    base: int  # index into the baseline's nodes
    other: int  # index into the other's nodes
    by: str  # identity | gpus | host


def pair_nodes(base: tuple[NodeId, ...], other: tuple[NodeId, ...]) -> tuple[tuple[NodePair, ...], tuple[Unmatched, ...]]:
    """Pair the nodes of two reports by who they are, never by position (same host and GPUs, then GPUs, then node
    name, then host), each at most once; the rest are returned as unmatched."""
    used_a: set[int] = set()
    used_b: set[int] = set()
    pairs: list[NodePair] = []
    tests = ((BY_IDENTITY, lambda x, y: x.host == y.host and bool(x.uuids) and x.uuids == y.uuids),
             (BY_GPUS, lambda x, y: bool(x.uuids) and x.uuids == y.uuids),
             (BY_NAME, lambda x, y: bool(x.name) and x.name == y.name),
             (BY_HOST, lambda x, y: x.host == y.host))
    for by, same in tests:
        for j, y in enumerate(other):
            if j in used_b:
                continue
            i = next((i for i, x in enumerate(base) if i not in used_a and same(x, y)), None)
            if i is not None:
                pairs.append(NodePair(i, j, by))
                used_a.add(i)
                used_b.add(j)
    left = [Unmatched(x.label, "baseline", x.host, tuple(sorted(x.uuids))) for i, x in enumerate(base)
            if i not in used_a]
    left += [Unmatched(y.label, "other", y.host, tuple(sorted(y.uuids))) for j, y in enumerate(other)
             if j not in used_b]
    return tuple(sorted(pairs, key=lambda p: p.other)), tuple(left)
