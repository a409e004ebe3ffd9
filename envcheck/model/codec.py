"""The report's versioned JSON form."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal

from envcheck.files import write_new
from envcheck.model.facts import ReportError
from envcheck.model.report import SCHEMA_VERSION, Report

FORMAT_NAME = "envcheck-report"


def to_dict(obj: Any) -> Any:
    """Plain JSON-ready data from model objects (dataclasses, tuples, dicts)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def build(tp: Any, data: Any) -> Any:
    """A model object of type ``tp`` (a dataclass, tuple, dict or union of them) from its JSON form."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if data is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return build(inner[0], data)
    if data is None:
        return None
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise ValueError(f"expected an object for {tp.__name__}")
        hints = _hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        kwargs = {k: build(hints[k], v) for k, v in data.items() if k in names}
        return tp(**kwargs)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(build(args[0], x) for x in data)
        return tuple(data)
    if origin is dict:
        return {k: build(args[1], v) for k, v in data.items()}
    if origin is Literal or tp is Any:
        return data
    if tp is float and isinstance(data, int):
        return float(data)
    return data


def from_dict(data: dict[str, Any]) -> Report:
    """A Report from its JSON form, any schema version this tool knows."""
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ReportError("not an envcheck report (no 'format': 'envcheck-report' field)")
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise ReportError("report has no integer schema_version")
    if version > SCHEMA_VERSION:
        raise ReportError(
            f"report schema {version} is newer than this envcheck understands ({SCHEMA_VERSION}): "
            "upgrade envcheck (pip install -U envcheck)"
        )
    if version < 1:
        raise ReportError(f"unknown report schema version {version}")
    # Version 1 is the only one so far; older versions will be upgraded here, step by step.
    body = {k: v for k, v in data.items() if k != "format"}
    try:
        return build(Report, body)
    except (TypeError, ValueError, AttributeError, KeyError) as e:
        raise ReportError(f"report is malformed: {e}") from None


def dumps(report: Report) -> str:
    data = {"format": FORMAT_NAME, **to_dict(report)}
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def loads(text: str) -> Report:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"not valid JSON ({e.msg} at line {e.lineno})") from None
    return from_dict(data)


def load(path: str | os.PathLike[str]) -> Report:
    """Read a report; every failure is a ReportError whose message names the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"{p}: is a directory, not a report file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{p}: cannot read ({e.__class__.__name__}: {e})") from None
    try:
        return loads(text)
    except ReportError as e:
        raise ReportError(f"{p}: {e}") from None


def dump(report: Report, path: str | os.PathLike[str]) -> Path:
    return write_new(path, dumps(report))
