"""JAX as another implementation, on jax's CPU build: every op judged the way the others are,
the forward + backward ops keeping their forward pass, and the real worker measuring the new
ops with PyTorch and JAX side by side (compile time recorded, accuracy judged).

JAX runs in child processes only (tests/jax_child.py, the worker): a process that started JAX's
backend warns on every later fork that it may deadlock, and the test process forks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envcheck.analysis.tolerance import judge, tolerance
from envcheck.bench import jax_impl, protocol
from envcheck.bench.suite import PlannedCase
from envcheck.model import Note, to_dict
from envcheck.ops import OPS
from tests.jax_child import DTYPES, FORWARD_BACKWARD, shape_of
from tests.test_worker import FAST, _plan, _run_worker

# Slow: JAX in child processes, its XLA compiles of every op at every dtype (~10 s) and a worker timing torch
# and JAX (~5 s); how the suite plans JAX (installed or not, which cases) is test_ops_new_plan.py's, in the fast loop.
pytestmark = [pytest.mark.skipif(not jax_impl.installed(), reason="JAX is not installed"),
              pytest.mark.xdist_group("jax"), pytest.mark.slow]  # one pytest-xdist worker: the child runs once
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def child() -> dict[str, Any]:
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "jax_child.py")], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(OPS))
def test_jax_output_is_judged_like_the_others_and_passes(child: dict[str, Any], op: str, dtype: str) -> None:
    (row,) = [r for r in child["judged"] if r["op"] == op and r["dtype"] == dtype]
    assert row["shape_ok"] and row["dtype_ok"], row
    assert row["passed"], row["why"]


def test_a_wrong_jax_output_fails_the_same_judge(child: dict[str, Any]) -> None:
    """The judge is the same for JAX: a gradient off by a factor of two fails."""
    assert child["doubled_passes"] is False


@pytest.mark.parametrize("op", FORWARD_BACKWARD)
def test_forward_backward_keeps_the_forward_output(child: dict[str, Any], op: str) -> None:
    """XLA drops what nothing uses: the function returns y beside the gradient, as autograd keeps it."""
    assert child["forward"][op] == {"forward_close": True, "grad_shape_ok": True}


def test_one_jit_serves_every_set_of_a_group(child: dict[str, Any]) -> None:
    """Rotating sets share one compiled function: tracing happens once, not once per set."""
    assert child["traces"] == 1
    assert child["sets_differ"]  # each call reads its own set


def test_the_worker_measures_the_new_ops_with_torch_and_jax_on_the_cpu() -> None:
    pytest.importorskip("torch")
    cases = [PlannedCase(op, impl, "fp32", "fp32", shape_of(op))
             for op in ("conv2d", "layer_norm", "sum_lead", "max_all", "softmax_fwbw", "linear_fwbw")
             for impl in ("torch", "jax")]
    out, events = _run_worker(to_dict(_plan(cases, settings=FAST)), timeout=600)
    assert out.done and out.failure is None, out.stderr_tail[-2000:]
    got = [e.case for e in events if isinstance(e, protocol.Measured)]
    assert [c.key for c in got] == [c.key for c in cases]
    for c in got:
        assert c.failure is None, (c.key, c.failure)
        assert c.launch is not None and c.launch.method == "host_clock"
        assert judge(c.accuracy, tolerance(c.op, c.dtype, c.precision, c.shape)).passed, c.key
        if c.impl == "jax":
            assert c.compile_s is not None and c.compile_s > 0  # trace + XLA compile + first run
            assert Note("case.jax_host_timed") not in c.notes  # a CPU baseline has no GPU time to miss


def test_a_cpu_only_jaxlib_on_cuda_inputs_is_a_recorded_skip_reason(child: dict[str, Any]) -> None:
    """jax's CPU build cannot take CUDA tensors: NoDevice (prepare makes it a skip, skip.jax_no_gpu)."""
    assert child["cuda_backend"] == "cpu"
