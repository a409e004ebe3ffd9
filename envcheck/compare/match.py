"""Pairing the cases of two benchmark runs, and deciding whether a pair may be compared.

Cases pair on ``Case.key`` (op, impl, dtype, precision, shape). A pair is compared
only when both sides were timed the same way on comparable terms; otherwise it
is kept, with the reason, so a reader sees *why* a row has no ratio instead of
the row silently disappearing or, worse, being compared anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.model import THROTTLED, Bench, Case, Timing

Key = tuple[str, str, str, str, tuple[int, ...]]


@dataclass(frozen=True)
class Matching:
    """Cases of a baseline run and another run, paired.

    ``pairs``: same key on both sides. ``precision_pairs``: same op, impl, dtype and
    shape but a different precision mode (e.g. IEEE fp32 vs TF32): never compared,
    listed so the mismatch is visible. ``only_base`` / ``only_other``: the rest.
    """

    pairs: tuple[tuple[Case, Case], ...]
    precision_pairs: tuple[tuple[Case, Case], ...]
    only_base: tuple[Case, ...]
    only_other: tuple[Case, ...]


def _first_by_key(cases: tuple[Case, ...]) -> dict[Key, Case]:
    # A report holds one case per key; if a future multi-GPU report repeats keys,
    # the first one measured is the one compared.
    out: dict[Key, Case] = {}
    for c in cases:
        out.setdefault(c.key, c)
    return out


def match(base: Bench | None, other: Bench | None) -> Matching:
    """Pair the cases of two runs (either may be None: a probe/check report has no bench)."""
    a = _first_by_key(base.cases if base else ())
    b = _first_by_key(other.cases if other else ())
    pairs = tuple((a[k], b[k]) for k in a if k in b)
    rest_a = [c for k, c in a.items() if k not in b]
    rest_b = [c for k, c in b.items() if k not in a]

    def loose(c: Case) -> tuple[str, str, str, tuple[int, ...]]:
        return (c.op, c.impl, c.dtype, c.shape)

    by_loose_b: dict[tuple[str, str, str, tuple[int, ...]], Case] = {}
    for c in rest_b:
        by_loose_b.setdefault(loose(c), c)
    precision_pairs = []
    used_b: set[int] = set()
    only_a = []
    for c in rest_a:
        d = by_loose_b.get(loose(c))
        if d is not None and id(d) not in used_b:
            precision_pairs.append((c, d))
            used_b.add(id(d))
        else:
            only_a.append(c)
    only_b = [c for c in rest_b if id(c) not in used_b]
    return Matching(pairs, tuple(precision_pairs), tuple(only_a), tuple(only_b))


POWER_CAP = "sw_power_cap"


def _is_throttled(c: Case) -> list[str]:
    reasons = list(c.monitor.throttle_reasons) if c.monitor else []
    if THROTTLED in c.flags or reasons:
        return reasons or ["throttled"]
    return []


def timings(a: Case, b: Case) -> tuple[str | None, Timing | None, Timing | None, list[str]]:
    """Which timing the pair is compared on (``gpu`` or ``launch``), the two timings, and any
    reasons the pair cannot be compared.

    GPU time (graph replay) is preferred when both sides have it; otherwise
    launch time when both have it. Timings taken by different methods (graph replay
    vs events vs a host clock) measure different things and are never mixed.
    """
    reasons: list[str] = []
    if a.status == "error" or b.status == "error":
        for side, c in (("baseline", a), ("other", b)):
            if c.status == "error":
                reasons.append(f"{side} could not run" + (f": {c.message}" if c.message else ""))
        return None, None, None, reasons
    if a.gpu and b.gpu:
        which, ta, tb = "gpu", a.gpu, b.gpu
    elif a.launch and b.launch:
        which, ta, tb = "launch", a.launch, b.launch
    else:
        ma = a.best_time.method if a.best_time else "none"
        mb = b.best_time.method if b.best_time else "none"
        return None, None, None, [f"no common timing (baseline {ma}, other {mb})"]
    if ta.method != tb.method:
        reasons.append(f"timing methods differ ({ta.method} vs {tb.method})")
    return which, ta, tb, reasons


def comparability(a: Case, b: Case) -> list[str]:
    """Reasons a paired (baseline, other) case must not be compared; empty when it may be."""
    reasons: list[str] = []
    if a.precision != b.precision:
        reasons.append(f"precision differs ({a.precision} vs {b.precision})")
    if a.tf32 != b.tf32:
        reasons.append(f"TF32 differs (baseline {'on' if a.tf32 else 'off'}, other {'on' if b.tf32 else 'off'})")
    elif a.error and b.error and a.error.precision != b.error.precision:
        reasons.append(f"arithmetic differs ({a.error.precision} vs {b.error.precision})")
    ta, tb = _is_throttled(a), _is_throttled(b)
    # Both sides at their software power cap is the normal state of a GPU under a full
    # tensor-core load (an H100 / H200 reaches 700 W on a large matmul): each ran at its rated
    # power, so the pair compares what the two machines deliver. Any other throttling, or
    # throttling on one side only, means one side ran below what its hardware can do.
    if not (set(ta) == set(tb) == {POWER_CAP}):
        for side, t in (("baseline", ta), ("other", tb)):
            if t:
                reasons.append(f"{side} throttled ({', '.join(t)})")
    reasons.extend(timings(a, b)[3])
    return reasons
