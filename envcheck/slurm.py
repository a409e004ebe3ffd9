"""Draining a node in Slurm: the one place envcheck runs ``scontrol``.

A HealthCheckProgram (slurm.conf) or a prolog that finds a problem drains its node so no job lands
there, with a reason ``sinfo -R`` shows; NHC does the same with ``scontrol update``. The node is
named as slurmd knows it (``SLURMD_NODENAME`` in a prolog or health check), else by the short host
name, which is what slurm.conf's NodeName usually holds.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

from envcheck.errors import UsageError

SCONTROL_TIMEOUT_S = 30.0


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def drain(reason: str) -> str:
    """Drain this node with ``reason``; the node's name. UsageError (one line) when scontrol is missing,
    fails or hangs: a health check that cannot drain must say so, not pass quietly."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise UsageError("--slurm-drain: scontrol is not on PATH (run it on a Slurm node, or drop --slurm-drain)")
    name = node_name()
    argv = [scontrol, "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"--slurm-drain: scontrol did not answer in {SCONTROL_TIMEOUT_S:.0f} s") from None
    except OSError as e:
        raise UsageError(f"--slurm-drain: cannot run scontrol ({e.strerror or e})") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise UsageError(f"--slurm-drain: scontrol failed (exit {done.returncode}): {said[0] if said else ''}")
    return name
