"""The report's versioned JSON form: written compactly, read strictly, old versions upgraded.

JSON format history (``schema_version``):
  1 - first format: environment sections + GPUs as facts, checks, one bench with cases
      holding raw samples AND derived numbers (GB/s, %, speedup, flags, status), English
      notes and reasons (2026-11-21).
  2 - raw results only (2026-11-22): ``benches`` (one per device) replaces ``bench``;
      timings hold samples only; ``accuracy`` (error statistics, no verdict) replaces
      ``error``; NVML samples per sampling window (``windows``) replace per-case summaries;
      measured ceilings are the samples of their kernels (``ceiling_runs``); notes, skip
      reasons and stops are keys plus parameters; ``settings`` is typed; ``anonymized``;
      ``node`` (topology, counters, peer copies, collectives) and ``fleet`` (kind ``fleet``).
  3 - additions only, so a schema-2 report reads as it is (2026-11-25): ``burn`` (kind ``burn``, or
      a run with ``--burn``: model/burn.py); ``replayed_from`` (a check of a replayed snapshot);
      checks carry ``key``, ``fix_key`` and ``params`` (phrased at render time; the English text
      stays); ``benches[].ops`` (a user's declared ops, ``envcheck bench``); ``Timing.passes``
      and ``settings.repeat`` (``run --repeat``), ``settings.control`` (the diff's positive
      control); a collective's ``gpu_timings`` / ``gpu_reason`` / ``gpu_error`` (its GPU time
      from CUDA-graph replays beside the per-call ``timings``) and its ``rotation_sets`` (buffers cycled
      through to keep L2 cold; absent: 1, as every earlier run used) and ``allocations`` (fresh allocations
      its timed calls were spread over; absent: 1), ``captures`` (graphs its GPU time pools) and
      ``communicators`` (over how many communicators they were captured; both absent: 1);
      op names of the new built-in ops and the implementation ``jax``; a burn GPU's ``control`` (the
      positive control it ran, ``burn --control``). The bump makes an older
      envcheck say it is too old instead of refusing a field it does not know.
  4 - additions only (2026-11-28): ``accuracy.excess_l2`` (the error beyond one rounding to the
      output's dtype); a case's ``outputs`` (the error of each output of an op with several,
      ``linear_fwbw``'s y, dx and dW); ``settings.interpret`` (``run --interpret``). linear_fwbw's
      output is y, dx and dW flattened one after the other (before: dx over dW), softmax_fwbw's
      y over dx with ``outputs`` y and dx (before: dx alone); reports without ``outputs`` are
      judged on their one whole-output statistic, as they were.
      Added within 4 (2026-11-28), fields an envcheck of schema 4 reads by leaving them out (the
      loader ignores names it does not know): where a run's time went, ``benches[].phases`` and a
      case's ``phases`` and ``span_s`` (model/bench.py's ``BENCH_PHASES``, ``CASE_PHASES``);
      ``settings.stop_ci`` (sequential stopping of a window: bench/timer.py); a collective's
      ``registered_*`` (its GPU time on NCCL-registered buffers: model/node.py).
  5 - additions only (2026-11-28): ``crosscheck`` (``run --crosscheck``; a fleet node's ``crosscheck``): what
      independent tools (``do_bench_cudagraph``, a plain torch copy, a ``torch.distributed`` loop, nccl-tests)
      measured of the same work in the same run, raw (model/crosscheck.py). The bump makes an older envcheck
      say it is too old instead of reading the report without the cross-checks its verdict depends on.

Upgrading schema 1 (``_upgrade_1``): derived numbers are dropped and recomputed by the
analysis; ``error`` keeps its two statistics; a case with status ``error`` gets a
``failure`` (stage ``run``, its message as detail), another case's message becomes a
``legacy.text`` note, as do notes and skip reasons (shown as recorded, in English); an
interruption becomes a ``legacy`` stop; measured ceilings, which had no samples, become
``recorded_ceilings``; theoretical ceilings are recomputed from the environment with the
current datasheet table; per-case NVML summaries stay (``monitor``). Schema 1 did not record
which cases rotated buffers to keep L2 cold: a case it did not flag ``l2_resident`` whose
working set fits in L2 was kept cold (that is what the flag meant), so it gets
``rotation_sets`` 2 ("kept cold"; the exact count was not recorded), every other case 1.

Encodings: timing and monitor samples are ``{"f32le_b64": "<base64>"}``, the little-endian
IEEE-754 float32 bytes of the samples (a plain list of numbers is read too). Fields holding
None, an empty tuple or an empty mapping, where that is also their default, are left out, as are
fields marked ``OMIT_DEFAULT`` holding their default (an addition whose default is what every
report written before it means, e.g. a collective's ``rotation_sets`` 1), so an older report
written back stays as it was.

Reading validates every field (type, finiteness, ranges, integers within 64 bits, what each
dataclass checks in ``__post_init__``, and the type of each fact value the analysis reads:
``model/facts.py``'s table); a problem is one ``ReportError`` line naming the file and the field, e.g.
``r.json: benches[0].cases[3].gpu.samples_us: timing samples must be finite and positive``.
Every string read is made encodable (``outside_text.encodable``: a lone surrogate, which JSON can spell
and no UTF-8 writer accepts, becomes U+FFFD), so a report that loads can be written and shown.
A check ``<subject>.internal`` (a rule that could not run) is a failure whatever status it was recorded
with: envcheck before issue 36 recorded it as a warning, and a node whose rules did not run is not healthy.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import enum
import functools
import gc
import json
import math
import os
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from envcheck.files import read_text, write_new
from envcheck.model.bench import LEGACY_TEXT, OMIT_DEFAULT, Note, Samples
from envcheck.model.facts import (
    GPU_FACT_RANGES,
    GPU_FACT_TYPES,
    Check,
    Environment,
    Gpu,
    ReportError,
    fact_type_problem,
    section_fact_type,
)
from envcheck.model.report import KINDS, SCHEMA_VERSION, Report
from envcheck.ops import OPS, spec
from envcheck.outside_text import json_value

FORMAT_NAME = "envcheck-report"
SAMPLES_KEY = "f32le_b64"
MAX_REPORT_BYTES = 512 << 20  # a report this large is not one envcheck wrote
VERDICT_KINDS = ("check", "run", "fleet", "burn")  # what export, diff and history read: a probe has facts only
# Integers a report holds (counts, sizes, shapes) fit in 64 bits; a larger one would overflow the
# analysis's float arithmetic (an OverflowError, not a ReportError), so it is refused at load.
MAX_INT = 2**63


# --------------------------------------------------------------------------- writing


def _omit(f: dataclasses.Field[Any], value: Any) -> bool:
    if f.metadata.get(OMIT_DEFAULT) and value == f.default:  # an addition whose default says "as before"
        return True
    if value is None or (isinstance(value, (tuple, dict)) and not value):
        if f.default is not dataclasses.MISSING:
            return f.default == value or (f.default is None and value is None)
        if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            return f.default_factory() == value  # type: ignore[misc]
    return False


def to_dict(obj: Any) -> Any:
    """Plain JSON-ready data from model objects (dataclasses, samples, enums, tuples, dicts)."""
    if isinstance(obj, Samples):
        return {SAMPLES_KEY: base64.b64encode(obj.to_bytes()).decode("ascii")}
    if isinstance(obj, enum.Enum):
        return obj.value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if not _omit(f, v):
                out[f.name] = to_dict(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(report: Report) -> str:
    data = {"format": FORMAT_NAME, **to_dict(report)}
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def dump(report: Report, path: str | os.PathLike[str]) -> Path:
    return write_new(path, dumps(report))


# --------------------------------------------------------------------------- reading


class _Bad(ValueError):
    """A problem at a place inside the report (turned into one ReportError line). The place is
    assembled on the way out, part by part, so reading a good report never formats a path."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(problem)
        self.parts = [path] if path else []
        self.problem = problem

    def at(self, part: str) -> _Bad:
        self.parts.insert(0, part)
        return self

    def __str__(self) -> str:
        path = ""
        for part in self.parts:
            path += part if part.startswith("[") or not path else f".{part}"
        return f"{path}: {self.problem}" if path else self.problem


Builder = Callable[[Any], Any]
_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _kind(data: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(data), "a number")


def _samples(data: Any) -> Samples:
    if isinstance(data, dict) and isinstance(data.get(SAMPLES_KEY), str):
        try:
            raw = base64.b64decode(data[SAMPLES_KEY], validate=True)
            return Samples.from_bytes(raw)
        except (binascii.Error, ValueError) as e:
            raise _Bad("", f"bad {SAMPLES_KEY} samples ({e})") from None
    if isinstance(data, list):
        # array('f') converts in C and refuses strings and nulls; true/false it would take as
        # 1 and 0, so a list that may hold one is checked item by item (1.0 == True: rarely).
        try:
            if not (True in data or False in data):
                return Samples(data)
        except (TypeError, OverflowError):
            pass  # checked item by item below, which names the item
        return Samples(_each(_number, data))
    raise _Bad("", f"expected samples ({{{SAMPLES_KEY!r}: ...}} or a list of numbers), got {_kind(data)}")


def _number(data: Any) -> float:
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise _Bad("", f"expected a number, got {_kind(data)}")
    try:
        x = float(data)
    except OverflowError:
        raise _Bad("", "expected a finite number, got an integer too large for one") from None
    if not math.isfinite(x):
        raise _Bad("", "expected a finite number")
    return x


def _param(data: Any) -> Any:
    if isinstance(data, list):
        return tuple(_each(_param, data))
    if data is None or isinstance(data, (str, bool)):
        return data
    if isinstance(data, int):
        return _int(data)
    if isinstance(data, float):
        return _number(data)
    raise _Bad("", f"a note parameter must be a string, number, true/false, null or a list, got {_kind(data)}")


def _each(b: Builder, items: list[Any]) -> list[Any]:
    out = []
    for i, x in enumerate(items):
        try:
            out.append(b(x))
        except _Bad as e:
            raise e.at(f"[{i}]") from None
    return out


def _int(data: Any) -> int:
    if isinstance(data, bool) or not isinstance(data, int):
        raise _Bad("", f"expected an integer, got {_kind(data)}")
    if not -MAX_INT < data < MAX_INT:
        raise _Bad("", "integer out of range (more than 64 bits)")
    return data


def _bool(data: Any) -> bool:
    if not isinstance(data, bool):
        raise _Bad("", f"expected true/false, got {_kind(data)}")
    return data


def _str(data: Any) -> str:
    if not isinstance(data, str):
        raise _Bad("", f"expected a string, got {_kind(data)}")
    return data


def _not_null(b: Builder) -> Builder:
    def build_value(data: Any) -> Any:
        if data is None:
            raise _Bad("", "must not be null")
        return b(data)
    return build_value


def _dataclass_builder(tp: type) -> Builder:
    hints = _hints(tp)
    fields = [(f.name, _builder(hints[f.name]),
               f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)  # type: ignore[misc]
              for f in dataclasses.fields(tp)]

    def build_dataclass(data: Any) -> Any:
        if not isinstance(data, dict):
            raise _Bad("", f"expected an object, got {_kind(data)}")
        kwargs = {}
        for name, b, required in fields:
            if name in data:
                try:
                    kwargs[name] = b(data[name])
                except _Bad as e:
                    raise e.at(name) from None
            elif required:
                raise _Bad(name, "missing")
        upgrade = _UPGRADES.get(tp)
        if upgrade is not None:
            kwargs = upgrade(kwargs)
        try:
            obj = tp(**kwargs)
        except (TypeError, ValueError, AttributeError, KeyError) as e:
            raise _Bad("", str(e)) from None
        check = _CHECKS.get(tp)
        if check is not None:
            check(obj)
        return obj
    return build_dataclass


def _check_facts(facts: Mapping[str, Any], type_of: Callable[[str], Any],
                 ranges: Mapping[str, tuple[float, float]] | None = None) -> None:
    for key, f in facts.items():
        kind = type_of(key)
        problem = fact_type_problem(kind, f.value, ranges.get(key) if ranges else None) if kind else None
        if problem:
            raise _Bad("value", problem).at(key)


def _check_gpu(gpu: Gpu) -> None:
    try:
        _check_facts(gpu.facts, GPU_FACT_TYPES.get, GPU_FACT_RANGES)
    except _Bad as e:
        raise e.at("facts") from None


def _check_environment(env: Environment) -> None:
    for section, facts in env.sections.items():
        try:
            _check_facts(facts, lambda key, section=section: section_fact_type(section, key))
        except _Bad as e:
            raise e.at(section).at("sections") from None


def _upgrade_check(fields: dict[str, Any]) -> dict[str, Any]:
    cid = fields.get("id")
    if isinstance(cid, str) and cid.endswith(INTERNAL_CHECK_SUFFIX) and fields.get("status") != "fail":
        return {**fields, "status": "fail"}  # a rule that could not run (see the module docstring)
    return fields


# What a built object's fields become before it is made (a verdict an older envcheck got wrong).
_UPGRADES: dict[type, Callable[[dict[str, Any]], dict[str, Any]]] = {Check: _upgrade_check}
INTERNAL_CHECK_SUFFIX = ".internal"  # checks/__init__.py: ``<subject>.internal``


# Checks of a built object beyond its fields' types: the fact values the analysis reads (facts.py's table).
_CHECKS: dict[type, Callable[[Any], None]] = {Gpu: _check_gpu, Environment: _check_environment}


@functools.cache
def _builder(tp: Any) -> Builder:
    """The function that builds ``tp`` from its JSON form, made once per type."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return lambda data: data
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        # The only union of several types is a note parameter's value.
        b = _builder(inner[0]) if len(inner) == 1 else _param
        if type(None) in args:
            return lambda data: None if data is None else b(data)
        return _not_null(b)
    if tp is Samples:
        return _not_null(_samples)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        known = ", ".join(str(m.value) for m in tp)

        def build_enum(data: Any) -> Any:
            try:
                return tp(data)
            except ValueError:
                raise _Bad("", f"unknown value {data!r} (known: {known})") from None
        return _not_null(build_enum)
    if dataclasses.is_dataclass(tp):
        return _not_null(_dataclass_builder(tp))  # type: ignore[arg-type]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _builder(args[0])

            def build_tuple(data: Any) -> tuple[Any, ...]:
                if not isinstance(data, list):
                    raise _Bad("", f"expected a list, got {_kind(data)}")
                return tuple(_each(item, data))
            return _not_null(build_tuple)
        items = [_builder(a) for a in args]

        def build_fixed(data: Any) -> tuple[Any, ...]:
            if not isinstance(data, list):
                raise _Bad("", f"expected a list, got {_kind(data)}")
            if len(data) != len(items):
                raise _Bad("", f"expected a list of {len(items)} items, got {len(data)}")
            out = []
            for i, (b, x) in enumerate(zip(items, data, strict=True)):
                try:
                    out.append(b(x))
                except _Bad as e:
                    raise e.at(f"[{i}]") from None
            return tuple(out)
        return _not_null(build_fixed)
    if origin in (dict, Mapping) or origin is typing.get_origin(Mapping[str, Any]):
        value = _builder(args[1])

        def build_mapping(data: Any) -> dict[str, Any]:
            if not isinstance(data, dict):
                raise _Bad("", f"expected an object, got {_kind(data)}")
            out = {}
            for k, v in data.items():
                try:
                    out[str(k)] = value(v)
                except _Bad as e:
                    raise e.at(str(k)) from None
            return out
        return _not_null(build_mapping)
    if origin is Literal:
        allowed = set(args)

        def build_literal(data: Any) -> Any:
            # A list or an object is not hashable: ``in`` a set would raise TypeError, not refuse it.
            if not isinstance(data, (str, int, float)):
                raise _Bad("", f"expected one of {', '.join(map(str, args))}, got {_kind(data)}")
            if data not in allowed:
                raise _Bad("", f"unknown value {data!r} (known: {', '.join(map(str, args))})")
            return data
        return _not_null(build_literal)
    simple = {bool: _bool, int: _int, float: _number, str: _str}.get(tp)
    return _not_null(simple) if simple else (lambda data: data)


def build(tp: Any, data: Any, path: str = "") -> Any:
    """A model object of type ``tp`` from its JSON form, validated; ``_Bad`` names the field."""
    try:
        return _builder(tp)(data)
    except _Bad as e:
        raise (e.at(path) if path else e) from None


def _upgrade_1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 report's JSON as schema 2 (see the module docstring)."""
    out = {k: v for k, v in data.items() if k != "bench"}
    bench = data.get("bench")
    if bench is not None and not isinstance(bench, dict):
        raise _Bad("bench", f"expected an object, got {_kind(bench)}")
    out["benches"] = [_upgrade_bench_1(bench)] if bench else []
    out["schema_version"] = SCHEMA_VERSION
    return out


def _legacy(text: Any) -> dict[str, Any]:
    return {"key": LEGACY_TEXT, "params": {"text": str(text)}}


_SETTINGS_1 = ("warmup_ms", "rep_ms", "min_samples", "max_samples", "cold_l2", "seed", "quick", "ops", "impls")


def _upgrade_bench_1(b: dict[str, Any]) -> dict[str, Any]:
    settings = b.get("settings") or {}
    if not isinstance(settings, dict):
        raise _Bad("bench.settings", f"expected an object, got {_kind(settings)}")
    out: dict[str, Any] = {
        "device": b.get("device"),
        "settings": {k: settings[k] for k in _SETTINGS_1 if k in settings},
        "started": b.get("started"),
        "duration_s": b.get("duration_s"),
        "versions": b.get("versions") or {},
        "notes": [_legacy(n) for n in _list(b, "notes")],
        "skipped": [{**{k: s.get(k) for k in ("op", "impl", "dtype", "shape", "precision") if k in s},
                     "reason": _legacy(s.get("reason", ""))} for s in _list(b, "skipped") if isinstance(s, dict)],
        "recorded_ceilings": [{k: c.get(k) for k in ("name", "value", "unit", "source")}
                              for c in _list(b, "ceilings") if isinstance(c, dict) and c.get("kind") == "measured"],
    }
    l2 = (b.get("device") or {}).get("l2_bytes") if isinstance(b.get("device"), dict) else None
    out["cases"] = []
    for i, c in enumerate(_list(b, "cases")):
        try:
            out["cases"].append(_upgrade_case_1(c, l2))
        except _Bad as e:
            raise e.at(f"bench.cases[{i}]") from None
    if b.get("partial") or b.get("interrupted"):
        out["stop"] = {"cause": "legacy", "detail": b.get("interrupted")}
    return {k: v for k, v in out.items() if v is not None}


def _list(d: dict[str, Any], key: str) -> list[Any]:
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise _Bad(f"bench.{key}", f"expected a list, got {_kind(v)}")
    return v


def _upgrade_case_1(c: Any, l2_bytes: Any) -> dict[str, Any]:
    if not isinstance(c, dict):
        raise _Bad("", f"expected an object, got {_kind(c)}")
    out = {k: c[k] for k in ("op", "impl", "dtype", "precision", "shape", "compile_s", "monitor", "kernel")
           if c.get(k) is not None}
    for t in ("gpu", "launch"):
        if isinstance(c.get(t), dict):
            out[t] = {k: c[t][k] for k in ("method", "samples_us", "calls_per_sample") if k in c[t]}
    err = c.get("error")
    if isinstance(err, dict):
        out["accuracy"] = {k: err[k] for k in ("rel_l2", "max_abs") if k in err}
    message = c.get("message")
    if c.get("status") == "error":
        out["failure"] = {"stage": "run", "detail": str(message or "unknown")}
    elif message:
        out["notes"] = [_legacy(message)]
    # Every value read here is checked before it is used as what it should be: the fields the
    # upgrade copies are validated by the schema-2 builder, but these only steer the upgrade.
    flags = c.get("flags")
    if flags is not None and (not isinstance(flags, list) or not all(isinstance(f, str) for f in flags)):
        raise _Bad("flags", f"expected a list of strings, got {_kind(flags)}")
    op, shape, dtype = c.get("op"), c.get("shape"), c.get("dtype")
    if (isinstance(op, str) and op in OPS and not spec(op).compute_bound and isinstance(shape, list)
            and "l2_resident" not in (flags or []) and isinstance(l2_bytes, int) and not isinstance(l2_bytes, bool)
            and isinstance(dtype, str)):
        try:
            spec(op).check_shape(tuple(shape))
            if spec(op).working_set_bytes(tuple(shape), dtype) <= l2_bytes:
                out["rotation_sets"] = 2
        except (ValueError, KeyError, TypeError, OverflowError):
            pass  # the case itself will be refused with the field named
    return out


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a report's objects are made. Building a large
    report makes hundreds of thousands of objects, none of them in a cycle, and every few
    hundred allocations the collector walked all of them again: half the time of loading a
    20,000-case report. Reference counting still frees everything; the collector runs again after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def from_dict(data: Any) -> Report:
    """A Report from its JSON form, any schema version this tool knows."""
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        got = data.get("format") if isinstance(data, dict) and isinstance(data.get("format"), str) else None
        raise ReportError(f"not an envcheck report ({f'an {got[:40]!r} document' if got else 'no format field'})")
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ReportError("schema_version: expected an integer")
    if version > SCHEMA_VERSION:
        raise ReportError(
            f"report schema {version} is newer than this envcheck understands ({SCHEMA_VERSION}): "
            "upgrade envcheck (pip install -U envcheck)"
        )
    if version < 1:
        raise ReportError(f"schema_version: unknown version {version}")
    body = {k: v for k, v in data.items() if k != "format"}
    try:
        if version == 1:
            body = _upgrade_1(body)
        with gc_paused():
            return build(Report, body)
    except _Bad as e:
        raise ReportError(str(e)) from None
    except RecursionError:
        raise ReportError("nested too deeply to be a report") from None


def _first_line(e: Exception) -> str:
    return str(e).split(";")[0].splitlines()[0] if str(e) else e.__class__.__name__


def _parse(text: str, where: str = "") -> Any:
    """The JSON value of ``text``; a ReportError (its message after ``where``) when it is none."""
    try:
        return json_value(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{where}not valid JSON ({e.msg} at line {e.lineno})") from None
    except ValueError as e:  # an integer literal of thousands of digits (int's string conversion limit)
        raise ReportError(f"{where}not a report ({_first_line(e)})") from None
    except RecursionError:
        raise ReportError(f"{where}nested too deeply to be a report") from None


def loads(text: str) -> Report:
    return from_dict(_parse(text))


def load(path: str | os.PathLike[str], kinds: tuple[str, ...] = KINDS) -> Report:
    """Read a report of one of ``kinds`` (its JSON, or the JSON gzip-compressed); every failure is a
    ReportError whose message names the file."""
    p = Path(path)
    text = read_text(p, "a report", MAX_REPORT_BYTES, ReportError)
    data = _parse(text, f"{p}: ")
    del text  # the text of a large report is as big as the model it becomes: not both at once
    try:
        report = from_dict(data)
    except ReportError as e:
        raise ReportError(f"{p}: {e}") from None
    if report.kind not in kinds:
        raise ReportError(f"{p}: a {report.kind} report, where a {', '.join(kinds[:-1])} or {kinds[-1]} report is expected")
    return report


__all__ = ["FORMAT_NAME", "Note", "build", "dump", "dumps", "from_dict", "load", "loads", "to_dict"]
