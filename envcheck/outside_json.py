"""JSON from outside (a report, a snapshot, a worker's message) read and typed by msgspec, every problem one line
naming the field: ``benches[0].device.sm_count: Expected `int`, got `bool```."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import re
import stat
import types
import typing
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from envcheck.outside_text import encodable

T = TypeVar("T")
Json = Any  # a JSON value as read or to be written, before anything types it: where values are Any
Form = Any  # a type as msgspec takes it: a class, a union, an Annotated alias
MAX_INT = 2**63
# An integer read from outside fits in 64 bits: a larger one would overflow float arithmetic far from where it was read.
Int = Annotated[int, msgspec.Meta(ge=-MAX_INT, le=MAX_INT - 1)]
_WORDS = {f"Expected `int` <= {MAX_INT - 1}": "integer out of range (more than 64 bits)",
          f"Expected `int` >= {-MAX_INT}": "integer out of range (more than 64 bits)"}
_AT = re.compile(r" - at `\$([^`]*)`$")  # msgspec's place of a problem
_MISSING = re.compile(r"Object missing required field `(\w+)`")
_SEGMENT = re.compile(r"\.\w+|\[\d+\]|\[\.\.\.\]")
Hook = Callable[[type, Json], object]
GZIP_MAGIC = b"\x1f\x8b"
MAX_INFLATION = 100  # reports and snapshots shrink 5 to 15 times under gzip; a bomb, a thousand times and more


def read_text(p: Path, max_bytes: int, error: type[Exception], what: str) -> str:
    """The text of the regular file ``p``, gzip-compressed or not, of at most ``max_bytes`` (nor ``MAX_INFLATION``
    times its compressed size), else one ``error`` line. Checked on the open file: a pipe or device is never read."""
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise error("error.no_such_file", path=p) from None
    except OSError as e:
        raise error("error.cannot_read", path=p, error=e.strerror or e) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error("error.is_dir", path=p, what=what)
        if not stat.S_ISREG(st.st_mode):
            raise error("error.not_regular", path=p, what=what)
        if st.st_size > max_bytes:
            raise error("error.too_large.bytes", path=p, what=what, count=st.st_size, most=max_bytes >> 20)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
        limit = max_bytes
        if data[:2] == GZIP_MAGIC:
            limit = min(max_bytes, MAX_INFLATION * len(data))
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            data = d.decompress(data, limit + 1)  # never more than the limit in memory: a bomb stops here
            if not d.eof and not d.unconsumed_tail:
                raise error("error.ends_early", path=p, what=what)
        if len(data) > limit:  # it grew while it was read, or decompressed to more
            raise error(f"error.too_large{'.inflated' if limit < max_bytes else ''}", path=p, what=what,
                        most=max_bytes >> 20, limit=limit, times=MAX_INFLATION)
        return data.decode("utf-8")
    except (OSError, zlib.error) as e:
        raise error("error.cannot_read", path=p, error=f"{e.__class__.__name__}: {e}") from None
    except UnicodeDecodeError as e:
        raise error("error.not_utf8", path=p, byte=e.start, what=what) from None
    finally:
        os.close(fd)


def versioned(data: Json, fmt: str, field: str, newest: int, error: type[Exception], keys: tuple[str, str, str]) -> int:
    """``data``'s version (``field``), 1 to ``newest``; else an ``error`` of ``keys``: not ``fmt``, too new, too old."""
    if not isinstance(data, dict) or data.get("format") != fmt:
        got = data.get("format") if isinstance(data, dict) and isinstance(data.get("format"), str) else None
        raise error(f"{keys[0]}{'.got' if got else ''}", got=repr(got and got[:40]))
    version = data.get(field)
    if isinstance(version, bool) or not isinstance(version, int):
        raise error("error.version_not_int", field=field)
    if version > newest:
        raise error(keys[1], version=version, known=newest)
    if version < 1:
        raise error(keys[2], field=field, version=version)
    return version


def check_numbers(value: object, where: str = "", max_depth: int = 0, ints: bool = True) -> None:
    """ValueError naming the first non-finite number, integer past 64 bits (``ints``) or too deep a value."""
    stack: list[tuple[object, int, str]] = [(value, 0, where)]
    while stack:
        v, depth, path = stack.pop()
        if max_depth and depth > max_depth:
            raise ValueError(f"{path}: nested more than {max_depth} levels deep")
        if isinstance(v, dict):
            stack.extend((x, depth + 1, f"{path}.{k}" if path else str(k)) for k, x in reversed(v.items()))
        elif isinstance(v, list):
            stack.extend((v[i], depth + 1, f"{path}[{i}]") for i in reversed(range(len(v))))
        elif ints and isinstance(v, int) and not -MAX_INT <= v < MAX_INT:
            raise ValueError(f"{path}: integer out of range (more than 64 bits)")
        elif isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{path}: expected a finite number")


def read_json(text: str, error: type[Exception], what: str) -> Json:
    """The JSON value of ``text``, read by msgspec; what only Python's reader takes (a lone surrogate, NaN, 1e400) is
    read by it, made encodable and checked, so that the error names the field."""
    with contextlib.suppress(msgspec.DecodeError, ValueError, RecursionError):
        return msgspec.json.decode(text)
    try:
        data = encodable(json.loads(text))
    except json.JSONDecodeError as e:
        raise error("error.not_json", error=e.msg, line=e.lineno) from None
    except RecursionError:
        raise error("error.too_deep", what=what) from None
    except ValueError as e:  # an integer literal of thousands of digits (int's string conversion limit)
        raise error("error.not_a", what=what, error=str(e).split(";")[0]) from None
    try:
        check_numbers(data, ints=False)
    except ValueError as e:
        raise error("error.as_is", error=e) from None
    return data

def convert(data: object, tp: type[T], where: str = "", dec_hook: Hook | None = None) -> T:
    """``data`` (decoded JSON) as ``tp``, validated; a ValueError's one line names the field (``where``: its place)."""
    try:
        return msgspec.convert(data, tp, dec_hook=dec_hook)
    except msgspec.ValidationError as e:
        problem, path = str(e), ""
        while m := _AT.search(problem):  # a hook's own place comes after the place of its field
            problem, path = problem[: m.start()], path + m.group(1)
        path = where + _named(data, tp, path, dec_hook)
        if m := _MISSING.fullmatch(problem):
            path, problem = f"{path}.{m[1]}", "missing"
        path, problem = path.lstrip("."), _WORDS.get(problem, problem)
        raise ValueError(f"{path}: {problem}" if path else problem) from None
    except (LookupError, AttributeError) as e:  # a model check (__post_init__) that tripped over a value
        raise ValueError(f"{where.lstrip('.') or 'value'}: {e.__class__.__name__}: {e}") from None


def _named(data: Json, tp: Form, path: str, dec_hook: Hook | None) -> str:
    """msgspec's ``path`` with each ``[...]`` (a mapping's value: the key is not named) the key whose value fails."""
    if "[...]" not in path:
        return path
    out = ""
    try:
        for seg in _SEGMENT.findall(path):
            tp = _member(tp, data)
            if seg == "[...]":
                tp = typing.get_args(tp)[1]
                key = next(k for k, v in data.items() if not _fits(v, tp, dec_hook))
                seg, data = f".{key}", data[key]
            elif seg.startswith("["):
                args, data = typing.get_args(tp), data[int(seg[1:-1])]
                tp = args[int(seg[1:-1])] if len(args) > 1 and args[-1] is not Ellipsis else args[0]
            else:
                tp, data = _hints(tp)[seg[1:]], data[seg[1:]]
            out += seg
    except (StopIteration, LookupError, TypeError, ValueError, AttributeError):
        return path
    return out


@functools.cache
def _hints(tp: type) -> dict[str, Form]:
    return typing.get_type_hints(tp, include_extras=True)


def _member(tp: Form, data: object) -> Form:
    """The type of a union (or of an Annotated type) that ``data`` is meant as: the first of its kind."""
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    union = typing.get_origin(tp) in (typing.Union, types.UnionType)
    members = [a for a in typing.get_args(tp) if a is not type(None)] if union else [tp]
    if isinstance(data, list):
        return next((m for m in members if typing.get_origin(m) in (list, tuple)), members[0])
    return next((m for m in members if typing.get_origin(m) in (dict, Mapping) or dataclasses.is_dataclass(m)
                 or isinstance(m, type) and issubclass(m, msgspec.Struct)), members[0])


def _fits(value: object, tp: Form, dec_hook: Hook | None) -> bool:
    try:
        msgspec.convert(value, tp, dec_hook=dec_hook)
    except msgspec.ValidationError:
        return False
    return True
