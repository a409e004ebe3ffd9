#!/usr/bin/env bash
# Set up .venv with the test tools (set-up names them, JAX among them) and run the linter, the type checker
# and the tests (CPU-only is fine; GPU tests skip without a GPU). Extra arguments go to pytest: the tests run on every core
# (pytest-xdist, a worker more than the cores; `-n 0` runs them in this one process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/python -m ruff check .
.venv/bin/python -m mypy  # model/, analysis/, compare/ ([tool.mypy] in pyproject.toml)
# Bytecode is cached for this run even where the environment says PYTHONDONTWRITEBYTECODE: each test process
# and each of the hundreds of envcheck processes the tests start would compile the package again.
unset PYTHONDONTWRITEBYTECODE
# One worker more than there are cores: tests that wait out a limit (a hung worker's, an NVML hang's) leave a
# core idle, and the extra worker fills it (2 cores, two runs back to back: the fast loop 127 -> 113 s).
# Quiet unless asked otherwise: dots, the failures and one summary line.
quiet=(-q)
for a in "$@"; do case "$a" in -q|-qq|-v|-vv|--quiet|--verbose) quiet=() ;; esac; done
.venv/bin/python -m pytest "${quiet[@]}" -n "$(( $(nproc) + 1 ))" --dist loadgroup "$@"
