"""Writing files that users keep: never replacing one, never leaving one half-written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_new(path: str | os.PathLike[str], content: str | bytes) -> Path:
    """Write ``content`` to ``path`` without ever replacing an existing file.

    The file appears whole or not at all (written beside it, then linked into place;
    the link fails if the name was taken meanwhile).
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); a report gets the permissions any new file would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        data = content.encode("utf-8") if isinstance(content, str) else content
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.link(tmp, p)
    finally:
        os.unlink(tmp)
    return p
