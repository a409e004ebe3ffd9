"""A scripted stand-in for ``python -m envcheck.bench.worker``, for the runner's tests.

Usage: ``python fake_worker.py SCRIPT.json``. It reads the plan on stdin like the real
worker, then plays the script's steps in order:

- ``{"emit": {...}}``: one protocol event as a JSON line on stdout
- ``{"raw": "text"}``: a line that is not a protocol event
- ``{"stderr": "text"}``: a line on stderr (raw: text with a lone surrogate is written as invalid UTF-8)
- ``{"sleep": S}``: pause S seconds
- ``{"play_plan": true}``: ``case_start`` + a measured ``case`` for every planned case
  (``{"play_plan": N}``: for the first N only)
- ``{"save_plan": "PATH"}``: write the plan received to PATH
- ``{"pid_file": "PATH"}``: write this process's pid to PATH (to check it was stopped); ``{pid}``
  in PATH becomes the pid, so several workers playing one script write apart
- ``{"spawn": "PATH"}``: start a sleeping child in a session of its own (out of the worker's
  process group, as a library's helper process may be) and write its pid to PATH
- ``{"orphan": "PATH"}``: start a sleeping grandchild in a session of its own through a child that
  exits at once (the grandchild is then nobody's descendant, as after a double fork) and keeps this
  worker's stdout and stderr open; its pid goes to PATH
- ``{"flood": [FD, MIB, SEP]}``: write MIB MiB of ``x`` on fd FD (1 or 2) in 1 MiB pieces, each
  followed by SEP (``""``: one endless line)
- ``{"progress": N}``: a progress bar drawn with ``\r`` only, N updates on stderr
- ``{"allocate_mb": N}``: allocate N MiB and touch every page (held until the worker ends)
- ``{"barrier": [DIR, N]}``: leave a file named by this pid in DIR, then wait (up to 60 s) until DIR
  holds N files; exit with status 3 if it never does (workers run one after another never meet)
- ``{"exit": N}``: exit with status N now
- ``{"signal": "SIGSEGV"}``: die by that signal (what a broken CUDA install does)

Standard library only: it must behave like a separate program, not share test state.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time

ORPHAN = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
with open(sys.argv[1], "w", encoding="utf-8") as f:
    f.write(str(child.pid))
"""
HELD: list = []


def write(stream, text: str) -> None:
    """A line as bytes: a lone surrogate goes out as the invalid UTF-8 a C library would write."""
    stream.flush()
    stream.buffer.write(text.encode("utf-8", errors="surrogatepass") + b"\n")
    stream.buffer.flush()


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def measured_case(c: dict) -> dict:
    """A schema-2 case as the real worker sends it: raw samples, accuracy statistics."""
    n = 1
    for d in c["shape"]:
        n *= d
    return {
        "op": c["op"], "impl": c["impl"], "dtype": c["dtype"], "precision": c["precision"], "shape": c["shape"],
        "launch": {"method": "host_clock", "samples_us": [10.0, 11.0, 12.0, 10.5, 11.5], "calls_per_sample": 1},
        "accuracy": {"rel_l2": 0.0, "max_abs": 0.0, "max_rel_elem": 0.0, "nonfinite": 0, "elements": n},
    }


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        script = json.load(f)
    plan = json.loads(sys.stdin.read() or "{}")
    for step in script:
        if "emit" in step:
            emit(step["emit"])
        elif "raw" in step:
            write(sys.stdout, step["raw"])
        elif "stderr" in step:
            write(sys.stderr, step["stderr"])
        elif "sleep" in step:
            time.sleep(step["sleep"])
        elif "pid_file" in step:
            with open(step["pid_file"].replace("{pid}", str(os.getpid())), "w", encoding="utf-8") as f:
                f.write(str(os.getpid()))
        elif "spawn" in step:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
            with open(step["spawn"], "w", encoding="utf-8") as f:
                f.write(str(child.pid))
        elif "orphan" in step:
            subprocess.run([sys.executable, "-c", ORPHAN, step["orphan"]], check=True)
        elif "flood" in step:
            fd, mib, sep = step["flood"]
            piece = b"x" * (1 << 20) + sep.encode()
            for _ in range(mib):
                os.write(fd, piece)
        elif "progress" in step:
            for i in range(step["progress"]):
                sys.stderr.write(f"\rprogress {i}/{step['progress']}")
            sys.stderr.flush()
        elif "allocate_mb" in step:
            block = bytearray(step["allocate_mb"] << 20)
            for k in range(0, len(block), 4096):
                block[k] = 1
            HELD.append(block)
        elif "save_plan" in step:
            with open(step["save_plan"], "w", encoding="utf-8") as f:
                json.dump(plan, f)
        elif "play_plan" in step:
            cases = plan.get("cases", [])
            limit = len(cases) if step["play_plan"] is True else int(step["play_plan"])
            for i, c in enumerate(cases[:limit]):
                emit({"event": "case_start", "i": i, "n": len(cases), "case": c})
                emit({"event": "case", "case": measured_case(c)})
        elif "barrier" in step:
            folder, count = step["barrier"]
            with open(os.path.join(folder, str(os.getpid())), "w", encoding="utf-8") as f:
                f.write("here")
            deadline = time.monotonic() + 60
            while len(os.listdir(folder)) < count:
                if time.monotonic() > deadline:
                    return 3
                time.sleep(0.05)
        elif "exit" in step:
            return int(step["exit"])
        elif "signal" in step:
            sys.stdout.flush()
            sys.stderr.flush()
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file in the test's folder
            sig = getattr(signal, step["signal"])
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            time.sleep(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
