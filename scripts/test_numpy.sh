#!/usr/bin/env bash
# The tests that NumPy computes for (envcheck diff's statistics and the committed diffs the docs quote), under
# the lowest NumPy pyproject.toml declares and under the newest: a build of its own for each, in
# .venv-numpy-lowest and .venv-numpy-newest (no system packages: the NumPy is the one asked for). JAX is not
# installed there (it wants a newer NumPy than envcheck does); these tests do not use it. Extra arguments go
# to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
floor=$(grep -o '"numpy>=[0-9.]*' pyproject.toml | cut -d= -f2)
failed=0
for which in lowest newest; do
  venv=".venv-numpy-$which"
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  want="numpy==$floor.*"
  [ "$which" = newest ] && want="numpy"
  echo "test_numpy: $which NumPy ($want) with envcheck and pytest, pytest-xdist, hypothesis, markdown-it-py, xmlschema into $venv"
  "$venv/bin/python" -m pip install -q -U -e . pytest pytest-xdist hypothesis markdown-it-py xmlschema "$want"
  "$venv/bin/python" -c "import numpy, sys; print(f'test_numpy: NumPy {numpy.__version__} on Python {sys.version.split()[0]}')"
  # The speed budget of the bootstrap is NumPy 2's (its vectorised sort): 1.23 sorts about 4x slower, still
  # seconds, not the minutes the budget guards against.
  skip=()
  [ "$which" = lowest ] && skip=(--deselect tests/test_compare_stats.py::test_forty_thousand_timings_take_seconds_not_minutes)
  "$venv/bin/python" -m pytest -q -n "$(nproc)" "${skip[@]}" tests/test_diff_evidence.py tests/test_compare_stats.py \
    tests/test_diff.py tests/test_diff_noise.py "$@" || failed=1
done
exit $failed
