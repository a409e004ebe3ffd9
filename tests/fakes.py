"""A fake ``Host`` for probe tests: an in-memory file system, canned commands and environment.

It is ``envcheck.probes.replay.ReplayHost`` (what ``--replay`` probes), built from
dictionaries instead of a snapshot file.

Feed it texts captured on real machines (``tests/fixtures/``), never invented ones.

Example: a WSL2 machine whose ``nvidia-smi`` works and whose libcuda.so.1 is a copy::

    host = FakeHost(
        files={
            "/proc/version": WSL2_PROC_VERSION,
            "/usr/lib/wsl/lib/libcuda.so.1.1": "",
            "/usr/lib/wsl/lib/libcuda.so.1": "",        # a regular file where a link belongs
        },
        links={"/usr/lib/x86_64-linux-gnu/libcuda.so.1": "/usr/lib/wsl/lib/libcuda.so.1"},
        dirs=["/dev/dxg"],
        commands={
            "nvidia-smi": (0, NVIDIA_SMI_Q, ""),          # keyed by argv[0] (name or full path)
            ("ldconfig", "-p"): (0, LDCONFIG_P, ""),        # or by the whole argv
            "dpkg-query": RunResult(("dpkg-query",), None, timed_out=True, error="timed out after 5 s"),
        },
        environ={"PATH": "/usr/bin:/usr/lib/wsl/lib", "WSL_DISTRO_NAME": "Ubuntu-22.04"},
    )

- ``files``: path -> text. A value that is an ``OSError`` instance is raised on read
  (e.g. ``PermissionError(13, "Permission denied")`` for /proc/1/environ).
- ``links``: path -> target (absolute or relative to the link's folder). A link whose
  target is not in the fake file system is broken: ``exists`` is False, ``is_symlink`` True.
- ``dirs``: folders that exist even if empty; parents of every file and link exist too.
- ``commands``: keyed by the argv tuple, by argv[0] as given, or by argv[0]'s base name
  (tried in that order). Values: a ``RunResult``, an ``(rc, stdout, stderr)`` tuple, or a
  callable ``argv -> either``. An unknown command gives ``error="not found"``, like a
  missing binary. Every call is appended to ``calls`` (tuples) for assertions.
- ``which``: name -> path or None, overriding the lookup; by default ``which`` searches
  the fake ``PATH`` in ``environ`` for a file of that name in the fake file system.
- ``disk_free``: bytes free, one number for every path or a dict path -> bytes (paths
  not listed raise FileNotFoundError).
- ``packages``: distribution name -> ``PackageInfo``; none by default (nothing of the real
  machine's site-packages leaks in). ``runs``: answers by run name (``torch_runtime``).
"""

from __future__ import annotations

from envcheck.probes.host import RunResult
from envcheck.probes.replay import CommandAnswer, CommandSpec, ReplayHost

__all__ = ["CommandAnswer", "CommandSpec", "FakeHost", "RunResult"]


class FakeHost(ReplayHost):
    """A machine made of dictionaries; see the module docstring."""
