"""Draining a node in Slurm (``check --slurm-drain``): the one place envcheck runs ``scontrol``. The node is named as
slurmd knows it (``SLURMD_NODENAME``), else by the short host name, and must be one node's name."""

from __future__ import annotations

import os
import re
import shutil
import socket

from envcheck.errors import UsageError
from envcheck.harness import command
from envcheck.harness.env import clean_env

SCONTROL_TIMEOUT_S = 30.0


# One node's name: scontrol reads a hostlist (``n[1-100]``), a list or ``ALL`` as many nodes, a '-' as an option.
_NODE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?")


def ready() -> tuple[str, str]:
    """This node's name (``SLURMD_NODENAME``, else the short host name) and scontrol's path; UsageError when the
    name is not one node's or scontrol is missing (called before any work)."""
    from envcheck.outside_text import visible

    env = os.environ.get("SLURMD_NODENAME")
    name = env if env else socket.gethostname().split(".")[0]
    if not _NODE_NAME.fullmatch(name) or name.lower() == "all":
        shown = visible(name[:80] + ("..." if len(name) > 80 else ""))
        raise UsageError(f"error.slurm_name{'' if env else '.host'}", name=shown)
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise UsageError("error.scontrol_missing")
    return name, scontrol


def drain(reason: str) -> str:
    """Drain this node with ``reason``; the node's name. UsageError when scontrol is missing, fails or hangs."""
    name, scontrol = ready()
    argv = [scontrol, "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"]
    done = command.run(argv, SCONTROL_TIMEOUT_S, env=clean_env(allow=("SLURM_*",)))
    if done.timed_out:
        raise UsageError("error.scontrol_timeout", limit=f"{SCONTROL_TIMEOUT_S:.0f}")
    if done.returncode is None:
        raise UsageError("error.scontrol_start", error=done.error)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise UsageError("error.scontrol_failed", code=done.returncode, said=said[0] if said else "")
    return name
