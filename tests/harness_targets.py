"""Tiny targets the harness's tests run in a child (``"harness_targets:NAME"``, this folder on the child's path).
Standard library only: each behaves as a separate program would."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time


def echo(args, out):
    out({"step": 1})
    out.phase("working")
    print("stray text on stdout")  # goes to stderr: never on the message fd
    return {"args": args}


def events(args, out):
    for i in range(args["n"]):
        out({"i": i, "text": args.get("text", "")})
        time.sleep(args.get("every_s", 0))
    time.sleep(args.get("then_s", 0))
    return "done"


def crash(args, out):
    out({"before": True})
    sys.stderr.write("Fatal Python error: Segmentation fault\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGSEGV)


def exit_quietly(args, out):
    os._exit(args)


def raises(args, out):
    raise RuntimeError("cannot fetch https://alice:s3cr3t-Pa55word@pypi.example/simple/")


def sleep(args, out):
    if args.get("pid_file"):
        with open(args["pid_file"], "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
    out.phase("sleeping")
    time.sleep(args.get("s", 120))


def freeze(args, out):
    """Stopped: alive, but not even the heartbeat thread runs (a process frozen, or its GIL held for good)."""
    out.phase("frozen")
    os.kill(os.getpid(), signal.SIGSTOP)


def garbage(args, out):
    out._stream.write("this is not a message\n")
    out._stream.flush()
    time.sleep(60)


def linger(args, out):
    """Done, then no exit (CUDA teardown that hangs)."""
    out.send("Done", result=1)
    time.sleep(120)


def surrogate(args, out):
    out({"text": "bad \ud800 text", "nan": float("nan")})
    return "\udcff"


def grandchild(args, out):
    """A child in this process's group that would outlive it, its pid in ``args``."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(args, "w", encoding="utf-8") as f:
        f.write(str(child.pid))
    out.phase("waiting")
    time.sleep(120)


def where(args, out):
    """Where this child finds json, torch and envcheck, and what of its environment it got."""
    import json

    import envcheck

    torch = importlib.util.find_spec("torch")
    return {"json": json.__file__, "envcheck": envcheck.__file__, "torch": torch.origin if torch else None,
            "path": sys.path, "environ": dict(os.environ)}


def reports(args, out):
    out({"a": 1, "b": 1})
    print("chatter")
    out({"b": 2})


def fails_import(args, out):
    import envcheck_no_such_module_xyz  # noqa: F401


def nothing(args, out):
    return None
