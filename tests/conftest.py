"""Shared test set-up: GPU-only tests skip cleanly without a usable CUDA GPU; JAX stays out of the
test process; charts are drawn only where a test looks at them."""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# The tests read what a pipe shows (render/terminal/console.py: COLUMNS, else 120 columns): a COLUMNS from
# the shell, or the 80 that pytest-xdist gives its workers, would wrap the lines they look for.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

# An error's words come from the catalogue once envcheck.render.i18n is imported, as the CLI does first
# (envcheck/cli.py): without it a test run alone would read the bare catalogue key.
import envcheck.render.i18n  # noqa: E402,F401

try:
    from hypothesis import settings
except ImportError:  # a test extra: without it the property tests skip (importorskip), the others run
    pass
else:
    # Property tests draw the same examples on every run, so a CI failure reproduces as it was;
    # `pytest --hypothesis-profile=explore` draws fresh ones.
    settings.register_profile("repeatable", derandomize=True, database=None)
    settings.register_profile("explore", derandomize=False)
    settings.load_profile("repeatable")


@functools.cache
def cuda_gpu_reason() -> str | None:
    """None when a CUDA GPU with torch and Triton is usable, else why not."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = cuda_gpu_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"GPU test: {reason}"))


@pytest.fixture(scope="session")
def cpu_burn(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``envcheck burn --cpu`` for real (seconds), once for the tests that read what it wrote, in every output
    format: the finished process and its folder. Those tests share an xdist group ("cpu_burn"), so that one
    worker runs it once."""
    out = tmp_path_factory.mktemp("cpu_burn")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-m", "envcheck", "burn", "--cpu", "--minutes", "0.05", "--out-dir",
                           str(out), "--format", "json,md,html,junit,prometheus"], capture_output=True, text=True,
                          env=env, timeout=600, cwd=out)
    return done, out


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread_per_test_process() -> None:
    """PyTorch in the test process computes on one thread: pytest-xdist runs a test process per core, and
    torch's second thread in each makes its OpenMP threads wait on each other for a core (an einsum of 512x512
    took ten times as long; test_verify_timer_user's timed rows 4-8 s on one thread, 38 s on two). The worker
    processes the tests start set their own threads (Settings.threads) as on a user's machine."""
    try:
        import torch  # the collection of the whole suite imports it anyway
    except ImportError:  # a test extra: without it the tests that need it skip
        return
    torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def _compile_cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Workers the tests start keep compiled kernels and matmul tiles in a folder of the session
    (bench/compile_cache.py), never in the user's cache."""
    os.environ.setdefault("ENVCHECK_CACHE_DIR", str(tmp_path_factory.mktemp("envcheck-cache")))


@pytest.fixture(autouse=True)
def _jax_stays_out_of_the_test_process() -> Iterator[None]:
    """JAX's backend runs threads, and JAX then warns on every later fork of the process ("os.fork() was
    called ... likely deadlock"): the tests fork (subprocesses, the chart pool), so JAX runs in children only.
    The first test to end with JAX imported fails (JAX came with it, or with a test module's import)."""
    yield
    if sys.modules.get("jax") is not None and not _JAX_SEEN:
        _JAX_SEEN.append(True)
        pytest.fail("JAX is imported in the test process (by this test or at collection): run JAX in a child "
                    "process, as tests/jax_child.py does")


_JAX_SEEN: list[bool] = []


PLACEHOLDER_SVG = '<svg xmlns="http://www.w3.org/2000/svg" class="undrawn-chart"></svg>'


@contextlib.contextmanager
def _undrawn() -> Iterator[None]:
    from envcheck.render import chart_draw

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chart_draw, "to_svg", lambda chart, name="chart": PLACEHOLDER_SVG)
        mp.setattr(chart_draw, "to_svgs", lambda jobs: [PLACEHOLDER_SVG for _ in jobs])
        mp.setattr(chart_draw, "to_png", lambda chart, dpi=144: b"\x89PNG\r\n\x1a\n")
        yield


@pytest.fixture(scope="module")
def charts_not_drawn() -> Iterator[None]:
    """Every chart a render asks for is a placeholder SVG, for a module whose tests read the documents around
    the charts and never the charts (their SVG text is left out, or its bytes are not compared): matplotlib's
    drawing is most of a render's time. Use it with ``pytestmark = pytest.mark.usefixtures("charts_not_drawn")``.
    The charts themselves are tested in test_chart_draw.py, test_charts.py and the golden files."""
    with _undrawn():
        yield


@pytest.fixture(scope="session")
def undrawn_charts() -> Callable[[], contextlib.AbstractContextManager[None]]:
    """``with undrawn_charts():`` charts_not_drawn for a part of one test: for a test that looks at the charts
    of one render and only at the text around them in the next (the same charts in another language)."""
    return _undrawn
