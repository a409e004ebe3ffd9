"""Which rows of a comparison are controls: cases whose code and surroundings did not change.

Nothing but noise and the whole run's drift moves a control's time ratio, so how far kinds of
controls move against one another is run-to-run noise, measured in the very comparison it
is needed for (see ``compare/stats.py``). A row is a control when nothing recorded says its
time should have moved:

* no environment difference outside the implementations' own software: same driver, CUDA,
  OS, Python, GPU model and limits, envcheck version and run settings. Another physical GPU
  of the same model (a new UUID) is allowed: a rerun on a cloud box meets exactly that, and
  the floor must include it.
* its implementation's software is the same: PyTorch for ``torch``; Triton (and ptxas) for
  ``triton``, which must also have run the same kernel (the matmul race may pick another
  tile); both for ``compile`` (torch.compile generates Triton code).
"""

from __future__ import annotations

from collections.abc import Sequence

from envcheck.analysis import CaseResult
from envcheck.compare.envdiff import EnvChange

# Which implementations each software area is under.
AREA_IMPLS = {"torch": frozenset({"torch", "compile"}), "triton": frozenset({"triton", "compile"})}
ALL_IMPLS = frozenset({"torch", "triton", "compile"})


def unchanged_impls(changes: Sequence[EnvChange]) -> frozenset[str]:
    """Implementations whose rows can be controls, given the environment changes."""
    out = set(ALL_IMPLS)
    for c in changes:
        if c.identity:
            continue
        touched = AREA_IMPLS.get(c.area)
        if touched is None:
            return frozenset()
        out -= touched
    return frozenset(out)


def is_control(a: CaseResult, b: CaseResult, unchanged: frozenset[str]) -> bool:
    return a.case.impl in unchanged and a.case.kernel == b.case.kernel
