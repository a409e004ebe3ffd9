"""A scripted stand-in for ``python -m envcheck.burn.worker``, for the burn runner's tests.

Usage: ``python fake_burn_worker.py SCRIPT.json``. It reads the plan on stdin like the real worker
and plays the steps listed under the plan's GPU index (``{"0": [...], "1": [...]}``), so GPUs of
one burn can behave differently:

- ``{"emit": {...}}``: one protocol event (already encoded as a JSON object) on stdout
- ``{"raw": "text"}``: a line that is not an event
- ``{"stderr": "text"}``: a line on stderr
- ``{"sleep": S}``: pause S seconds
- ``{"pid_file": "PATH"}``: write this process's pid to PATH (``{index}`` becomes the GPU index)
- ``{"exit": N}``: exit with status N; ``{"signal": "SIGSEGV"}``: die by that signal

Standard library only: it must behave like a separate program, not share test state.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def main() -> int:
    steps_by_gpu = json.loads(open(sys.argv[1], encoding="utf-8").read())
    plan = json.loads(sys.stdin.read())
    index = plan["index"]
    for step in steps_by_gpu[str(index)]:
        if "emit" in step:
            sys.stdout.write(json.dumps(step["emit"]) + "\n")
            sys.stdout.flush()
        elif "raw" in step:
            sys.stdout.write(step["raw"] + "\n")
            sys.stdout.flush()
        elif "stderr" in step:
            print(step["stderr"], file=sys.stderr, flush=True)
        elif "sleep" in step:
            time.sleep(step["sleep"])
        elif "pid_file" in step:
            with open(step["pid_file"].replace("{index}", str(index)), "w", encoding="utf-8") as f:
                f.write(str(os.getpid()))
        elif "exit" in step:
            return int(step["exit"])
        elif "signal" in step:
            os.kill(os.getpid(), getattr(signal, step["signal"]))
            time.sleep(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
