"""One module per subcommand: ``main(options) -> int`` (the exit status), ``options`` its typed options. Here: the
one way a command refuses and writes its ``--out`` file (never overwritten)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from envcheck.errors import UsageError


def tell(text: str) -> None:
    """A line for people on stderr, what the machine wrote in it escaped."""
    from envcheck.render.escape import visible

    print(visible(text), file=sys.stderr)


def say(text: str, stream: TextIO | None = None, command: str = "run") -> None:
    """A progress line, ``envcheck <command>: text``, on ``stream`` (default: stderr)."""
    print(f"envcheck {command}: {text}", file=stream if stream is not None else sys.stderr, flush=True)


def anonymize_key(anonymize: bool) -> bytes | None:
    """``--anonymize``'s key (kept per user: a machine keeps its pseudonyms from run to run), else None."""
    if not anonymize:
        return None
    from envcheck.anonymize import command_key

    return command_key()


def check_out(out: str | None, what: str = "file") -> Path | None:
    """``--out`` refused before any work: a taken name, a folder that is a file, cannot be made or written."""
    if not out:
        return None
    from envcheck.destination import DestinationError, prepare_destination

    try:
        prepare_destination(Path(out))
    except FileExistsError:
        raise UsageError("error.taken", path=out, what=what) from None
    except DestinationError as e:
        raise UsageError("error.flag", flag="--out", error=e) from None
    return Path(out)


def write_out(out: str | Path, text: str, what: str = "file") -> Path:
    """``text`` in the new file ``out``; a taken name or a failed write is one line."""
    from envcheck.files import write_new

    try:
        return write_new(out, text)
    except FileExistsError:
        raise UsageError("error.taken", path=out, what=what) from None
    except OSError as e:
        raise UsageError("error.cannot_write", path=out, error=e.strerror or e) from None
