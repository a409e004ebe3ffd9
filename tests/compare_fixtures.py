"""Reports for the comparison tests: the committed real runs, and copies of them changed in one known way.

The committed H200 runs (evidence/2026-11-21_2341Z and 2026-11-22_0104Z) are a real negative
control for PyTorch: same PyTorch, Triton, driver and CUDA, another physical H200; only
envcheck's Triton matmul kernels changed between them: no shipped floor covers another GPU, so a diff
of them judges no row. Two runs back to back on one H200 (2026-11-22_2139Z, _2143Z) are judged with the
floors shipped for the H200. The H100 run is another GPU model.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection
from pathlib import Path

from envcheck import model
from envcheck.model import Case, CaseKey, Report, Timing, known

REPORTS = Path(__file__).resolve().parent.parent / "evidence"
H200_BEFORE = REPORTS / "2026-11-21_2341Z_vm_h200.json.gz"
H200_AFTER = REPORTS / "2026-11-22_0104Z_vm_h200.json.gz"
H100 = REPORTS / "2026-11-22_0057Z_vm_h100-80gb-hbm3.json.gz"
H200_CHECK = REPORTS / "2026-11-21_2341Z_vm_h200_check.json.gz"
H200_RERUN = (REPORTS / "2026-11-22_2139Z_vm_h200.json.gz", REPORTS / "2026-11-22_2143Z_vm_h200.json.gz")


@functools.cache
def load(path: Path) -> Report:
    return model.load(path)


def h200_before() -> Report:
    return load(H200_BEFORE)


def h200_after() -> Report:
    return load(H200_AFTER)


def h200_rerun() -> tuple[Report, Report]:
    """Two runs back to back on one H200: the shipped floors hold for them."""
    return load(H200_RERUN[0]), load(H200_RERUN[1])


def h100() -> Report:
    return load(H100)


def _scaled(t: Timing | None, factor: float) -> Timing | None:
    if t is None:
        return None
    return Timing(t.method, [x * factor for x in t.samples_us], t.calls_per_sample)


def with_cases(r: Report, cases: tuple[Case, ...]) -> Report:
    b = r.benches[0]
    return dataclasses.replace(r, benches=(dataclasses.replace(b, cases=cases), *r.benches[1:]))


def scaled(r: Report, factor: float, keys: Collection[CaseKey] | None = None) -> Report:
    """A copy with every sample of the cases ``keys`` (default: all) multiplied by ``factor``."""
    cases = tuple(dataclasses.replace(c, gpu=_scaled(c.gpu, factor), launch=_scaled(c.launch, factor))
                  if keys is None or c.key in keys else c for c in r.benches[0].cases)
    return with_cases(r, cases)


def with_fact(r: Report, section: str, key: str, value: object) -> Report:
    env = r.environment
    sections = {**env.sections, section: {**env.sections.get(section, {}), key: known(value)}}
    return dataclasses.replace(r, environment=dataclasses.replace(env, sections=sections))


def with_version(r: Report, name: str, version: str) -> Report:
    """A copy that ran with another ``torch`` or ``triton``: the probe and the bench say so."""
    r = with_fact(r, name, "version", version)
    b = r.benches[0]
    return dataclasses.replace(r, benches=(dataclasses.replace(b, versions={**b.versions, name: version}),))


def with_gpu_fact(r: Report, key: str, value: object) -> Report:
    env = r.environment
    g = env.gpus[0]
    gpus = (dataclasses.replace(g, facts={**g.facts, key: known(value)}), *env.gpus[1:])
    return dataclasses.replace(r, environment=dataclasses.replace(env, gpus=gpus))


def keys(r: Report, *, impl: str | None = None, op: str | None = None, not_op: str | None = None) -> list[CaseKey]:
    return [c.key for c in r.benches[0].cases
            if c.measured and (impl is None or c.impl == impl) and (op is None or c.op == op)
            and (not_op is None or c.op != not_op)]
