"""``envcheck run --repeat N``: N independent repeats of every case in one report, so a diff can tell a change from
run-to-run noise. Each repeat is a fresh worker over the whole plan, sampling as a single run does; a case keeps
every repeat's samples in one ``Timing`` (``passes``), the worst numeric error, every note, and
``case.repeat_failed`` for a repeat in which it failed.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from envcheck.bench.runner import BenchOutcome
from envcheck.model import Accuracy, Case, CaseKey, Note, Settings, Timing


def pass_settings(settings: Settings, repeat: int) -> Settings:
    """Each repeat's settings: a single run's, the repeat count recorded."""
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    return settings if repeat == 1 else dataclasses.replace(settings, repeat=repeat)


def _join(timings: Sequence[Timing]) -> Timing:
    """One timing of several repeats' samples, in order, with each repeat's count."""
    first = timings[0]
    if len(timings) == 1:
        return first
    samples = [x for t in timings for x in t.samples_us]
    return Timing(first.method, samples, first.calls_per_sample, tuple(t.n for t in timings))


def _worst(accuracies: Sequence[Accuracy | None]) -> Accuracy | None:
    """The accuracy of the repeat that erred most: a verdict never passes what failed once."""
    got = [a for a in accuracies if a is not None]
    if not got:
        return None
    return max(got, key=lambda a: (a.nonfinite or 0, a.rel_l2, a.max_rel_elem or 0.0, a.max_abs))


def merge_cases(repeats: Sequence[tuple[int, Case]]) -> Case:
    """One case from its repeats: (repeat number from 1, the case as that repeat reported it)."""
    measured = [(i, c) for i, c in repeats if c.measured]
    if not measured:
        return repeats[0][1]
    first = measured[0][1]
    notes = list(dict.fromkeys(n for _, c in measured for n in c.notes))
    notes += [Note("case.repeat_failed", {"repeat": i, "stage": c.failure.stage})
              for i, c in repeats if c.failure is not None]
    # Joined per method: the GPU time keeps only the repeats whose graph held.
    gpus = [c.gpu for _, c in measured if c.gpu is not None and c.gpu.method == (first.gpu.method if first.gpu else "")]
    launches = [c.launch for _, c in measured
                if c.launch is not None and first.launch is not None and c.launch.method == first.launch.method]
    return dataclasses.replace(
        first, gpu=_join(gpus) if gpus else None, launch=_join(launches) if launches else None,
        accuracy=_worst([c.accuracy for _, c in measured]), notes=tuple(notes),
        phases=added(c.phases for _, c in repeats), span_s=None if len(repeats) > 1 else first.span_s)


def added(phases: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Seconds per phase over the repeats (a span is one worker's: several have none in common)."""
    out: dict[str, float] = {}
    for p in phases:
        for name, s in p.items():
            out[name] = round(out.get(name, 0.0) + s, 4)
    return out


def merge(outcomes: Sequence[BenchOutcome]) -> BenchOutcome:
    """Every repeat's outcome as one: cases merged by key, windows one after the other, the first repeat's ceilings,
    every note, the first stop."""
    if not outcomes:
        raise ValueError("nothing to merge")
    if len(outcomes) == 1:
        return outcomes[0]
    out = BenchOutcome(device=outcomes[0].device, versions=dict(outcomes[0].versions))
    by_key: dict[CaseKey, list[tuple[int, Case]]] = {}
    for i, o in enumerate(outcomes, start=1):
        offset = len(out.windows)
        out.windows.extend(o.windows)
        for c in o.cases:
            if c.window is not None:
                c = dataclasses.replace(c, window=c.window + offset)
            by_key.setdefault(c.key, []).append((i, c))
        out.notes.extend(o.notes)
    out.cases = [merge_cases(v) for v in by_key.values()]
    seen: set[CaseKey] = set(by_key)
    for o in outcomes:
        for s in o.skips:
            if s.key not in seen:
                seen.add(s.key)
                out.skips.append(s)
    out.ceiling_runs = list(outcomes[0].ceiling_runs)
    out.notes = list(dict.fromkeys(out.notes))
    stopped = [o for o in outcomes if o.stop is not None]
    if stopped:
        out.stop = stopped[0].stop
    last = outcomes[-1]
    out.stderr_tail, out.returncode, out.done = last.stderr_tail, last.returncode, all(o.done for o in outcomes)
    out.phases = added(o.phases for o in outcomes)
    return out
