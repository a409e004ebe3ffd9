"""Scripted stand-ins for the cross-check's kernel worker (``envcheck.crosscheck.kernel_worker:main``), one
target a mode, run by the harness like the real worker (``command(MODE)``):

- ``ok``: a ``row`` event with samples for every planned row (each row's ``rep_ms`` as the sample, in us);
- ``half``: rows for the first half of the plan, then exits 3 with a line on stderr quoting a token;
- ``hang``: the first row, then sleeps until it is stopped.

Standard library only: it must behave like a separate program, not share test state.
"""

from __future__ import annotations

import os
import sys
import time

TOKEN = "hf_" + "A" * 30


def command(mode: str) -> tuple[str, ...]:
    return (f"fake_crosscheck_worker:{mode}", os.path.dirname(os.path.abspath(__file__)))


def _rows(plan, out, upto):
    out({"event": "ready", "torch": "fake", "device": "cuda"})
    for i, row in enumerate(plan["rows"][:upto]):
        out({"event": "row", "i": i, "samples_us": [float(row["rep_ms"])] * 3})


def ok(plan, out):
    _rows(plan, out, len(plan["rows"]))


def half(plan, out):
    _rows(plan, out, len(plan["rows"]) // 2)
    print(f"crashed with token {TOKEN}", file=sys.stderr, flush=True)
    os._exit(3)


def hang(plan, out):
    _rows(plan, out, 1)
    time.sleep(120)
