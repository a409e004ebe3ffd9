"""Where a file is about to be written: checked before the work that produces it (a taken name is one line at once,
not a lost minute), and private when it is a fallback folder in a shared place. The writing is ``files.py``."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from envcheck.errors import Said
from envcheck.files import exists


class DestinationError(Said):
    """A file cannot be written where asked (one line: what is wrong with the folder)."""


def prepare_destination(path: Path) -> None:
    """Make sure a new file ``path`` can be written: its folder exists and is writable, the name free."""
    if exists(path):
        raise FileExistsError(17, "File exists", str(path))
    prepare_folder(path.parent if str(path.parent) else Path("."))


def prepare_folder(folder: Path, create: bool = True) -> None:
    """``folder`` made if missing and checked writable (DestinationError otherwise). ``create=False``: only checked,
    the nearest existing folder on its path standing for it (for a writer that makes the folders itself)."""
    if exists(folder) and not folder.is_dir():
        raise DestinationError("error.dest_is_file", path=folder)
    if not create:
        nearest = folder
        while not exists(nearest) and nearest.parent != nearest:
            nearest = nearest.parent
        if not nearest.is_dir():
            raise DestinationError("error.dest_nearest_file", path=folder, nearest=nearest)
        if not os.access(nearest, os.W_OK | os.X_OK):
            raise DestinationError("error.dest_unwritable", path=nearest)
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise DestinationError("error.dest_path_file", path=folder) from None
    except OSError as e:
        raise DestinationError("error.dest_create", path=folder, error=e.strerror or e) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DestinationError("error.dest_unwritable", path=folder)


def private_folder(folder: Path) -> None:
    """``folder`` made (mode 0700) if missing, then verified as this user's own, not a symlink, closed to others
    (DestinationError otherwise): in the temporary folder anyone may have made the name first."""
    try:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass  # verified below, whoever made it
    except OSError as e:
        raise DestinationError("error.dest_create", path=folder, error=e.strerror or e) from None
    try:
        st = os.lstat(folder)
    except OSError as e:
        raise DestinationError("error.dest_inspect", path=folder, error=e.strerror or e) from None
    if stat.S_ISLNK(st.st_mode):
        raise DestinationError("error.dest_symlink", path=folder)
    if not stat.S_ISDIR(st.st_mode):
        raise DestinationError("error.not_folder", path=folder)
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise DestinationError("error.dest_other_user", path=folder, uid=st.st_uid)
    if st.st_mode & 0o077:
        # Ours, but open to others (a loose umask): a report names the host and its GPUs, so close it first.
        with contextlib.suppress(OSError, NotImplementedError):
            os.chmod(folder, 0o700, follow_symlinks=False)
        mode = stat.S_IMODE(os.lstat(folder).st_mode)
        if mode & 0o022:
            raise DestinationError("error.dest_open", path=folder, mode=f"{mode:o}")
