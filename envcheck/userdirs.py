"""The user's folders envcheck writes to by default (XDG Base Directory), out of every source tree.

Reports: ``$XDG_DATA_HOME/envcheck/reports`` (else ``~/.local/share/...``); ``ENVCHECK_REPORTS_DIR`` moves it,
``--out-dir`` overrides it per run, ``envcheck history`` with no path reads it. Compiled kernels and tuning
(bench/compile_cache.py): ``$XDG_CACHE_HOME/envcheck`` (else ``~/.cache/envcheck``); ``ENVCHECK_CACHE_DIR``
moves it.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "ENVCHECK_REPORTS_DIR"
CACHE_VAR = "ENVCHECK_CACHE_DIR"


def reports_dir() -> Path:
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "envcheck" / "reports"


def out_dir(value: str | None) -> str:
    """``--out-dir`` as given, else the default folder (as text, as the commands take it)."""
    return value if value else str(reports_dir())


def cache_dir() -> Path:
    explicit = os.environ.get(CACHE_VAR)
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "envcheck"
