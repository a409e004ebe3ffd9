"""Draining a node in Slurm: the one place envcheck runs ``scontrol``.

A HealthCheckProgram (slurm.conf) or a prolog that finds a problem drains its node so no job lands
there, with a reason ``sinfo -R`` shows; NHC does the same with ``scontrol update``. The node is
named as slurmd knows it (``SLURMD_NODENAME`` in a prolog or health check), else by the short host
name, which is what slurm.conf's NodeName usually holds; either must be one node's name (a
hostlist or ``ALL`` would drain many nodes). Only a check of this machine drains it: ``check
--replay`` refuses ``--slurm-drain`` (the findings are another machine's).
"""

from __future__ import annotations

import os
import re
import shutil
import socket

from envcheck.errors import UsageError
from envcheck.harness import command
from envcheck.harness.env import clean_env

SCONTROL_TIMEOUT_S = 30.0


# One node's name, as a host name is spelled: letters, digits, '-', '_' and '.', starting and ending
# with a letter or digit. scontrol reads more than one node in NodeName: a hostlist (``n[1-100]``), a
# comma list, ``ALL``; a name starting with '-' would be an option and a newline a second line.
_NODE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?")
_NOT_ONE_NODE = {"all"}


def node_name() -> str:
    """This node's name (``SLURMD_NODENAME``, else the short host name); UsageError (one line) when it
    is not one node's name: envcheck drains this node, never a list of them."""
    from envcheck.outside_text import visible

    env = os.environ.get("SLURMD_NODENAME")
    name = env if env else socket.gethostname().split(".")[0]
    if not _NODE_NAME.fullmatch(name) or name.lower() in _NOT_ONE_NODE:
        where = "SLURMD_NODENAME" if env else "the host name"
        shown = visible(name[:80] + ("..." if len(name) > 80 else ""))
        raise UsageError(f"--slurm-drain: {where} '{shown}' is not one node's name (letters, digits, '-', '_', '.'; "
                         "no hostlist, no ALL): nothing drained")
    return name


def ready() -> tuple[str, str]:
    """This node's name and scontrol's path; UsageError (one line) when either is missing. Called before any
    work, so a drain that could not happen is said at once, not after the checks."""
    name = node_name()
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise UsageError("--slurm-drain: scontrol is not on PATH (run it on a Slurm node, or drop --slurm-drain)")
    return name, scontrol


def drain(reason: str) -> str:
    """Drain this node with ``reason``; the node's name. UsageError (one line) when scontrol is missing,
    fails or hangs: a health check that cannot drain must say so, not pass quietly."""
    name, scontrol = ready()
    argv = [scontrol, "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"]
    done = command.run(argv, SCONTROL_TIMEOUT_S, env=clean_env(allow=("SLURM_*",)))
    if done.timed_out:
        raise UsageError(f"--slurm-drain: scontrol did not answer in {SCONTROL_TIMEOUT_S:.0f} s")
    if done.returncode is None:
        raise UsageError(f"--slurm-drain: cannot run scontrol ({done.error})")
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise UsageError(f"--slurm-drain: scontrol failed (exit {done.returncode}): {said[0] if said else ''}")
    return name
