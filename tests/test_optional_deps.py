"""A missing optional test dependency skips the tests that need it, never the others: `pytest -m gpu` on a
GPU machine installed without the test extras must still collect and run (xmlschema imported at the top of
one module once stopped the whole collection with exit 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The test extras, and what a CPU machine may lack.
OPTIONAL = ("hypothesis", "markdown_it", "xmlschema", "jax", "triton", "torch")
# A test that needs one of them, and a neighbour in its module that needs none.
NEEDS = {"test_outputs.py::test_junit_counts_each_failed_check_and_case": "xmlschema",
         "test_json_controls.py::test_json_text_reads_back_to_the_same_strings": "hypothesis",
         "test_render.py::test_markdown_code_spans_and_rows_cannot_be_broken_out_of": "markdown_it",
         "test_burn_kernels.py::test_a_clean_cpu_burn_passes_with_every_check_done": "torch",
         "test_ops_new_jax.py::test_a_wrong_jax_output_fails_the_same_judge": "JAX"}
NEEDS_NONE = ("test_outputs.py::test_prometheus_numbers_are_the_analysis_numbers_in_base_units",
              "test_json_controls.py::test_diff_json_escapes_c1",
              "test_render.py::test_rendering_twice_gives_identical_bytes")


@pytest.mark.slow  # collects the whole suite in a child process
def test_without_the_optional_dependencies_the_suite_collects_and_only_their_tests_skip() -> None:
    names = [n.split("::")[1] for n in (*NEEDS, *NEEDS_NONE)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ENVCHECK_TEST_BLOCK": ",".join(OPTIONAL)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.block_imports", "-p", "no:hypothesispytest",
                           "-p", "no:cacheprovider", "-v", "-rs", "-k", " or ".join(names), "tests"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    outcome = dict(re.findall(r"^tests/(\S+::\S+) (PASSED|SKIPPED|FAILED|ERROR)", done.stdout, re.MULTILINE))
    # Skip reasons per file: a test's own, or its module's where every test there needs the dependency.
    reasons: dict[str, list[str]] = {}
    for file, reason in re.findall(r"^SKIPPED \[\d+\] tests/(\S+?\.py):\d+: (.*)$", done.stdout, re.MULTILINE):
        reasons.setdefault(file, []).append(reason)
    for test, module in NEEDS.items():
        file = test.split("::")[0]
        assert outcome.get(test, "SKIPPED") == "SKIPPED", (test, done.stdout[-4000:])
        assert any(module in r for r in reasons.get(file, [])), (test, module, reasons)  # the skip names it
    assert {t: outcome.get(t) for t in NEEDS_NONE} == dict.fromkeys(NEEDS_NONE, "PASSED"), done.stdout[-4000:]
    assert not re.search(r"\d+ error", done.stdout.splitlines()[-1]), done.stdout[-2000:]
