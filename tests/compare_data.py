"""Diffs and histories built by ``envcheck.compare`` from factory reports, for presentation tests.

Every machine-supplied string a diff or a history shows (report labels, host, GPU names, a
driver version, a check's title, finding and fix, an NVML throttle reason) comes from
``Strings``, so a test can make each of them hostile and check that the terminal, Markdown and
HTML renderings show it and never obey it. The rows themselves are real: ``compare.diff`` and
``compare.history`` computed them from reports that differ in known ways (a 10 % faster other
side, one case throttled on the baseline, one numeric pass turned fail, one case on each side only). Its two
GPU models have no noise floor in common, so it judges no row; ``judged`` is a diff whose every row is judged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import compare_fixtures as fx
import factories

from envcheck.compare.diff import Diff
from envcheck.compare.diff import diff as compare_diff
from envcheck.compare.history import History
from envcheck.compare.history import history as compare_history
from envcheck.model import Accuracy, Check, Report


@dataclass(frozen=True)
class Strings:
    """Every machine-supplied string a diff or a history shows (a test swaps in hostile ones)."""

    base_label: str = "2026-11-22_0057Z_vm_h100-80gb-hbm3.json.gz"
    other_label: str = "2026-11-22_0104Z_vm_h200.json.gz"
    host: str = "vm"
    base_gpu: str = "NVIDIA H100 80GB HBM3"
    other_gpu: str = "NVIDIA H200"
    env_value: str = "580.159.04"
    check_title: str = "GPU not shared"
    check_finding: str = "GPU 0 runs 1 other process (python, 1.2 GiB)"
    check_fix: str = "stop the other process (nvidia-smi --query-compute-apps=pid,name --format=csv)"
    reason: str = "hw_thermal_slowdown"
    mixed_gpus: bool = False  # a history whose reports name more than one GPU model


def _checks(s: Strings, status: str) -> tuple[Check, ...]:
    return (Check("gpu.processes", status, s.check_title, s.check_finding,
                  fix=s.check_fix if status != "pass" else None),)  # type: ignore[arg-type]


def _throttled_first_matmul(r: Report, reason: str) -> Report:
    """The baseline's first matmul group slowed by ``reason`` (its NVML window says so)."""
    b = r.benches[0]
    w = next(c.window for c in b.cases if c.op == "matmul")
    win = b.windows[w]
    windows = list(b.windows)
    windows[w] = dataclasses.replace(win, reasons=tuple(("hw_slowdown", reason) for _ in win.reasons))
    return dataclasses.replace(r, benches=(dataclasses.replace(b, windows=tuple(windows)), *r.benches[1:]))


def _changed(r: Report, *, fail_numeric: bool, drop: int) -> Report:
    """``r`` with the Triton bf16 matmul 512^3 numerically wrong (``fail_numeric``) and case ``drop`` left out."""
    b = r.benches[0]
    cases = []
    for i, c in enumerate(b.cases):
        if i == drop:
            continue
        if fail_numeric and (c.op, c.impl, c.dtype, c.shape) == ("matmul", "triton", "bf16", (512, 512, 512)):
            c = dataclasses.replace(c, accuracy=Accuracy(0.5, 40.0, 2.0, 0, c.accuracy.elements))
        cases.append(c)
    return dataclasses.replace(r, benches=(dataclasses.replace(b, cases=tuple(cases)), *r.benches[1:]))


def diff(s: Strings = Strings(), comparisons: int = 1) -> Diff:
    """A baseline against ``comparisons`` other runs, each 10 % faster."""
    base = factories.report(gpu_name=s.base_gpu, host=s.host, created="2026-11-22T00:57:00Z", driver="575.57.08",
                            checks=_checks(s, "pass"))
    base = _changed(_throttled_first_matmul(base, s.reason), fail_numeric=False, drop=0)
    others = [(s.other_label if i == 0 else f"{i}-{s.other_label}",
               _changed(factories.report(gpu_name=s.other_gpu, host=s.host, created=f"2026-11-22T01:0{4 + i}:00Z",
                                         driver=s.env_value, scale=0.9, seed=i + 1, checks=_checks(s, "warn")),
                        fail_numeric=True, drop=1))
              for i in range(comparisons)]
    return compare_diff([(s.base_label, base), *others])


def judged() -> Diff:
    """The committed back-to-back pair on one H200, the second run's every time 10 % shorter: every comparable row
    judged with the floors shipped for the H200, most of them faster."""
    base, other = fx.h200_rerun()
    return compare_diff([(fx.H200_RERUN[0].name, base), (fx.H200_RERUN[1].name, fx.scaled(other, 0.9))])


def history(s: Strings = Strings(), points: int = 3) -> History:
    """``points`` runs of one machine a day apart, each 5 % faster than the one before, the driver
    changed after the first."""
    reports = []
    for i in range(points):
        gpu = s.base_gpu if s.mixed_gpus and i == 0 else s.other_gpu
        r = factories.report(gpu_name=gpu, host=s.host, created=f"2026-11-2{i + 1}T01:04:00Z",
                             driver="575.57.08" if i == 0 else s.env_value, scale=0.95**i, seed=i,
                             checks=_checks(s, "warn"))
        reports.append((f"{i}-{s.other_label}", r))
    return compare_history(reports)
