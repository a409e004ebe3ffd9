"""A scripted stand-in for the benchmark worker (``envcheck.bench.worker:main``), for the runner's tests.

``command(SCRIPT)`` is the worker command that plays SCRIPT.json (a module beside it names it). Run by the
harness like the real worker, it gets the plan, then plays the script's steps in order:

- ``{"emit": {...}}``: one protocol event
- ``{"done": {...}}``: the harness's Done with these phases (the worker returned); without one, the worker
  exits 0 at the script's end without it
- ``{"raw": "text"}``: a line on stdout (which a child of the harness writes to its stderr)
- ``{"stderr": "text"}``: a line on stderr (raw: text with a lone surrogate is written as invalid UTF-8)
- ``{"sleep": S}``: pause S seconds
- ``{"play_plan": true}``: ``case_start`` + a measured ``case`` for every planned case
  (``{"play_plan": N}``: for the first N only)
- ``{"save_plan": "PATH"}``: write the plan received to PATH (``save_env``: the environment)
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


def command(script, fake: str = "fake_worker") -> tuple[str, ...]:
    """The worker command (target, then folders for its ``sys.path``) that plays ``script`` with the ``player``
    of module ``fake``."""
    script = os.path.abspath(script)
    name = f"{fake}_" + "".join(c if c.isalnum() else "_" for c in script)[-80:]
    with open(os.path.join(os.path.dirname(script), name + ".py"), "w", encoding="utf-8") as f:
        f.write(f"from {fake} import player\nmain = player({script!r})\n")
    return (f"{name}:main", os.path.dirname(os.path.abspath(__file__)), os.path.dirname(script))


def player(script_path: str):
    def main(plan, out):
        with open(script_path, encoding="utf-8") as f:
            script = json.load(f)
        status = play(script, plan or {}, out)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    return main


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


def play(script: list, plan: dict, out) -> int:
    for step in script:
        if "emit" in step:
            out(step["emit"])
        elif "done" in step:
            out.send("Done", result=step["done"])
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
        elif "save_plan" in step or "save_env" in step:
            with open(step.get("save_plan") or step["save_env"], "w", encoding="utf-8") as f:
                json.dump(plan if "save_plan" in step else dict(os.environ), f)
        elif "play_plan" in step:
            cases = plan.get("cases", [])
            limit = len(cases) if step["play_plan"] is True else int(step["play_plan"])
            for i, c in enumerate(cases[:limit]):
                out({"event": "case_start", "i": i, "n": len(cases), "case": c})
                out({"event": "case", "case": measured_case(c)})
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
