"""Where a file is about to be written: checked before the work that produces it, and private when shared.

* ``prepare_destination`` / ``prepare_folder``: a command that writes one file (``check --out``,
  ``snapshot``, ``diff --out``, ``render --out``) checks the name and its folder before it probes or
  computes for a minute, so a taken name, a folder that is a file, or one that cannot be made or
  written is one line at once, not a lost minute and a traceback.
* ``private_folder``: a fallback folder in a shared place (the system's temporary folder) is used
  only when it is this user's own: made with mode 0700, or verified as such when it exists.

The writing itself (never replacing, never half-written) is ``envcheck/files.py``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from envcheck.files import exists


class DestinationError(Exception):
    """A file cannot be written where asked (one line: what is wrong with the folder)."""


def prepare_destination(path: Path) -> None:
    """Make sure a new file ``path`` can be written, before the work that produces it: its folder
    exists (created if missing) and is writable, and the name is free (FileExistsError otherwise).
    Raises DestinationError naming the folder and the problem."""
    if exists(path):
        raise FileExistsError(17, "File exists", str(path))
    prepare_folder(path.parent if str(path.parent) else Path("."))


def prepare_folder(folder: Path, create: bool = True) -> None:
    """``folder`` made if missing and checked writable (DestinationError otherwise). ``create=False``:
    only checked, the nearest existing folder on its path standing for it (a writer that makes
    the folders itself, and removes them again when it fails)."""
    if exists(folder) and not folder.is_dir():
        raise DestinationError(f"{folder} is a file, not a folder: choose a file name in a folder")
    if not create:
        nearest = folder
        while not exists(nearest) and nearest.parent != nearest:
            nearest = nearest.parent
        if not nearest.is_dir():
            raise DestinationError(f"cannot create the folder {folder}: {nearest} is a file")
        if not os.access(nearest, os.W_OK | os.X_OK):
            raise DestinationError(f"{nearest} is not writable: choose another folder")
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise DestinationError(f"cannot create the folder {folder}: part of its path is a file") from None
    except OSError as e:
        raise DestinationError(f"cannot create the folder {folder} ({e.strerror or e})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DestinationError(f"{folder} is not writable: choose another folder")


def private_folder(folder: Path) -> None:
    """``folder`` made (mode 0700) if missing, then verified as this user's own: a real folder (not a
    symlink), owned by this user, writable by nobody else (one of ours open to others is closed to 0700). DestinationError otherwise, naming why:
    in a shared place (the temporary folder) anyone may have made the name first, as a symlink to a
    folder of theirs or as a folder they can read, to collect what is written there."""
    try:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass  # verified below, whoever made it
    except OSError as e:
        raise DestinationError(f"cannot create the folder {folder} ({e.strerror or e})") from None
    try:
        st = os.lstat(folder)
    except OSError as e:
        raise DestinationError(f"cannot inspect {folder} ({e.strerror or e})") from None
    if stat.S_ISLNK(st.st_mode):
        raise DestinationError(f"{folder} is a symbolic link, not a folder of this user's")
    if not stat.S_ISDIR(st.st_mode):
        raise DestinationError(f"{folder} is not a folder")
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise DestinationError(f"{folder} belongs to another user (uid {st.st_uid})")
    if st.st_mode & 0o077:
        # Ours, but open to others (made by an older envcheck, or under a loose umask): a report in
        # it names the host, its GPUs and its environment, so it is closed before use.
        try:
            os.chmod(folder, 0o700, follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass
        mode = stat.S_IMODE(os.lstat(folder).st_mode)
        if mode & 0o022:
            raise DestinationError(f"{folder} is writable by other users (mode {mode:o})")
