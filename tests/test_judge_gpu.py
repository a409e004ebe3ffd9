"""The judge on a GPU (issue 48): every planted bug (tests/planted.py) fails every case it applies to
at the ``run --quick`` suite's shapes, by several times its bound, through the worker's own path
(inputs, checked calls, exact inputs, float64 reference); and no correct kernel of that suite, PyTorch
or envcheck's Triton, comes near its bound. The same checks as tests/test_judge.py's under the
interpreter, compiled for the GPU this time (sampled at the quick settings, as ``run --quick`` is).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")  # the planted bugs are torch code

from envcheck.model import Case, build  # noqa: E402
from envcheck.ops import OP_NAMES  # noqa: E402
from tests.planted import PLANTED  # noqa: E402
from tests.test_judge import check_planted, judged  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    pytest.importorskip("triton")
    return torch


def _run(op: str, plant: str | None = None) -> list[Case]:
    from envcheck.bench.suite import GPU_QUICK_SETTINGS, PlannedCase, _default_shapes
    from tests.interpret_child import run_planned

    applies = PLANTED[plant].applies if plant else (lambda dtype, shape: True)
    planned = tuple(PlannedCase(op, impl, d, p, s) for d, p, s in _default_shapes(op, "cuda", True)
                    if applies(d, s) for impl in ("torch", "triton"))
    return [build(Case, c) for c in run_planned(planned, "cuda", GPU_QUICK_SETTINGS, plant)]


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_bug_fails_its_cases_at_the_quick_suites_shapes(name, cuda):
    check_planted(name, _run(PLANTED[name].op, name))


@pytest.mark.parametrize("op", OP_NAMES)
def test_no_correct_kernel_of_the_quick_suite_comes_near_its_bound(op, cuda):
    results = judged(_run(op))
    assert results and all(r.case.measured for r in results)
    near = [(r.case.key, r.verdict) for r in results if r.status != "pass" or r.verdict.ratio > 0.5]
    assert not near
