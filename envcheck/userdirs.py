"""The user's folders envcheck writes to by default (XDG): reports in ``$XDG_DATA_HOME/envcheck/reports``
(``ENVCHECK_REPORTS_DIR``, ``--out-dir``), compiled kernels in ``$XDG_CACHE_HOME/envcheck`` (``ENVCHECK_CACHE_DIR``).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "ENVCHECK_REPORTS_DIR"
CACHE_VAR = "ENVCHECK_CACHE_DIR"


def _folder(override: str, xdg: str, fallback: str, *tail: str) -> Path:
    explicit = os.environ.get(override)
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get(xdg) or os.path.join(os.path.expanduser("~"), fallback), "envcheck", *tail)


def reports_dir() -> Path:
    return _folder(ENV_VAR, "XDG_DATA_HOME", os.path.join(".local", "share"), "reports")


def out_dir(value: str | None) -> str:
    """``--out-dir`` as given, else the default folder (as text, as the commands take it)."""
    return value if value else str(reports_dir())


def cache_dir() -> Path:
    return _folder(CACHE_VAR, "XDG_CACHE_HOME", ".cache")
