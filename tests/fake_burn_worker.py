"""A scripted stand-in for the burn worker (``envcheck.burn.worker:main``), for the burn runner's tests.

``command(SCRIPT)`` is the worker command that plays SCRIPT.json: the steps listed under the plan's GPU index
(``{"0": [...], "1": [...]}``), so GPUs of one burn can behave differently:

- ``{"emit": {...}}``: one protocol event (already encoded); ``{"done": true}``: the worker returns
- ``{"raw": "text"}``: a line on stdout (a child of the harness writes it to its stderr)
- ``{"stderr": "text"}``: a line on stderr
- ``{"sleep": S}``: pause S seconds
- ``{"pid_file": "PATH"}``: write this process's pid to PATH (``{index}`` becomes the GPU index)
- ``{"exit": N}``: exit with status N; ``{"signal": "SIGSEGV"}``: die by that signal

Without ``done`` or ``exit``, it exits 0 at the script's end without returning. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from fake_worker import command as _command


def command(script) -> tuple[str, ...]:
    return _command(script, "fake_burn_worker")


def player(script_path: str):
    def main(plan, out):
        with open(script_path, encoding="utf-8") as f:
            steps_by_gpu = json.load(f)
        index = plan["index"]
        for step in steps_by_gpu[str(index)]:
            if "emit" in step:
                out(step["emit"])
            elif "done" in step:
                return None
            elif "raw" in step:
                print(step["raw"], flush=True)
            elif "stderr" in step:
                print(step["stderr"], file=sys.stderr, flush=True)
            elif "sleep" in step:
                time.sleep(step["sleep"])
            elif "pid_file" in step:
                with open(step["pid_file"].replace("{index}", str(index)), "w", encoding="utf-8") as f:
                    f.write(str(os.getpid()))
            elif "exit" in step:
                os._exit(int(step["exit"]))
            elif "signal" in step:
                os.kill(os.getpid(), getattr(signal, step["signal"]))
                time.sleep(5)
        os._exit(0)

    return main
