"""A scripted stand-in for ``python -m envcheck.crosscheck.kernel_worker``.

Usage: ``python fake_crosscheck_worker.py MODE``. It reads the plan on stdin like the real worker, then:

- ``ok``: a ``row`` event with samples for every planned row (each row's ``rep_ms`` as the sample, in us), ``done``;
- ``half``: rows for the first half of the plan, then exits 3 with a line on stderr naming ``$HF_TOKEN``;
- ``hang``: the first row, then sleeps until it is stopped.

Standard library only: it must behave like a separate program, not share test state.
"""

from __future__ import annotations

import json
import os
import sys
import time


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    mode = sys.argv[1]
    plan = json.loads(sys.stdin.read())
    emit({"event": "start", "pid": os.getpid()})
    emit({"event": "ready", "torch": "fake", "device": "cuda"})
    rows = plan["rows"]
    upto = {"ok": len(rows), "half": len(rows) // 2, "hang": 1}[mode]
    for i, row in enumerate(rows[:upto]):
        emit({"event": "row", "i": i, "samples_us": [float(row["rep_ms"])] * 3})
    if mode == "half":
        print(f"crashed with token {os.environ.get('HF_TOKEN', '')}", file=sys.stderr)
        return 3
    if mode == "hang":
        time.sleep(120)
    emit({"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
