"""Where a user's own reports go by default: out of every source tree.

``envcheck run`` used to default to ``./reports``, which inside a checkout (this project's included)
mixed a user's runs with committed evidence and left ``git status`` dirty. The default is now the
user's data folder (XDG Base Directory: ``$XDG_DATA_HOME/envcheck/reports``, else
``~/.local/share/envcheck/reports``); ``ENVCHECK_REPORTS_DIR`` moves it, ``--out-dir`` overrides it per
run, and ``envcheck history`` with no path reads it.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "ENVCHECK_REPORTS_DIR"


def reports_dir() -> Path:
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "envcheck" / "reports"


def out_dir(value: str | None) -> str:
    """``--out-dir`` as given, else the default folder (as text, as the commands take it)."""
    return value if value else str(reports_dir())
