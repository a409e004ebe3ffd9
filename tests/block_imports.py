"""A pytest plugin that makes modules fail to import, as on a machine without them:
``ENVCHECK_TEST_BLOCK=hypothesis,xmlschema python -m pytest -p tests.block_imports -p no:hypothesispytest``
(hypothesis's own pytest plugin goes with hypothesis). tests/test_optional_deps.py runs the suite with it.

Loaded by ``-p``, before conftest.py and any test module: ``import name`` raises ModuleNotFoundError and
``importlib.util.find_spec(name)`` answers None, as for a module that is not installed.
"""

from __future__ import annotations

import os
import sys

BLOCKED = tuple(n for n in os.environ.get("ENVCHECK_TEST_BLOCK", "").split(",") if n)

for _name in BLOCKED:
    sys.modules[_name] = None  # type: ignore[assignment]
