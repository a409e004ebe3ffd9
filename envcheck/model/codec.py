"""The report's versioned JSON on msgspec: written compactly, read strictly (``msgspec.convert`` over the model's
frozen dataclasses, whose ``__post_init__`` checks what a type cannot), an older schema upgraded first.

JSON format history (``schema_version``):
  1 - environment, checks and one ``bench`` of cases with samples and derived numbers, English notes.
  2 - raw results only: ``benches``, ``accuracy``, NVML ``windows``, ``ceiling_runs``, notes as keys, ``node``, ``fleet``.
  3 - additions: ``burn``, ``replayed_from``, check keys, declared ``ops``, repeats, collectives' GPU time.
  4 - additions: ``excess_l2``, ``outputs``, ``settings.interpret``; within 4: phases, ``stop_ci``, ``registered_*``.
  5 - additions: ``crosscheck``, a bump so that an older envcheck says it is too old.
An addition reads by leaving it out (unknown fields are ignored): only 1 -> 2 is a step (``UPGRADES``). Samples
are ``{"f32le_b64": ...}`` (a list of numbers is read too); a field at a default of None, () or {} (or marked
``OMIT_DEFAULT``) is left out, so an older report written back stays as it was.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import enum
import functools
import gc
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import msgspec

from envcheck.files import write_new
from envcheck.model.bench import LEGACY_TEXT, OMIT_DEFAULT, Note, Samples
from envcheck.model.facts import GPU_FACT_RANGES, Environment, Facts, ReportError, fact_type
from envcheck.model.report import KINDS, SCHEMA_VERSION, Report
from envcheck.ops import OPS, spec
from envcheck.outside_json import Json, check_numbers, convert, read_json, read_text, versioned

T = TypeVar("T")
JSON = dict[str, Json]  # a decoded JSON object before it is converted
FORMAT_NAME = "envcheck-report"
SAMPLES_KEY = "f32le_b64"
MAX_REPORT_BYTES = 512 << 20  # a report this large is not one envcheck wrote
VERDICT_KINDS = ("check", "run", "fleet", "burn")  # what export, diff and fleet --baseline read: a probe has facts only


_KEEP = object()


@functools.cache
def _left_out(cls: type) -> tuple[tuple[str, object], ...]:
    """Each field's name and the value it is left out at (``_KEEP``: never)."""
    out = []
    for f in dataclasses.fields(cls):
        d: object = f.default
        if d is dataclasses.MISSING:
            d = f.default_factory() if f.default_factory is not dataclasses.MISSING else _KEEP
        out.append((f.name, d if f.metadata.get(OMIT_DEFAULT) or d is None or d == () or d == {} else _KEEP))
    return tuple(out)


def to_dict(obj: object) -> Json:
    """Plain JSON-ready data from model objects (dataclasses, samples, enums, tuples, mappings)."""
    if isinstance(obj, Samples):
        return {SAMPLES_KEY: base64.b64encode(obj.to_bytes()).decode("ascii")}
    if isinstance(obj, enum.Enum):
        return obj.value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for name, skip in _left_out(type(obj)):
            v = getattr(obj, name)
            if skip is _KEEP or v != skip:
                out[name] = to_dict(v)
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
    try:
        return msgspec.json.format(msgspec.json.encode(data), indent=1).decode() + "\n"
    except UnicodeEncodeError:  # a lone surrogate from the machine: Python's writer keeps it (write_new escapes it)
        return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def dump(report: Report, path: str | os.PathLike[str]) -> Path:
    return write_new(path, dumps(report))


def _dec_hook(tp: type, obj: object) -> object:
    if tp is not Samples:
        raise NotImplementedError(tp)
    try:
        if isinstance(obj, dict) and isinstance(obj.get(SAMPLES_KEY), str):
            return Samples.from_bytes(msgspec.convert(obj[SAMPLES_KEY], bytes))  # base64, decoded in C
        if isinstance(obj, list):
            return Samples(msgspec.convert(obj, list[float]))
    except msgspec.ValidationError as e:
        raise ValueError(str(e)) from None
    raise ValueError(f"expected samples ({{{SAMPLES_KEY!r}: ...}} or a list of numbers)")


def build(tp: type[T], data: object, where: str = "") -> T:
    """A model object of type ``tp`` from its JSON form, validated (numbers and fact types included)."""
    check_numbers(data, where, ints=False)
    obj = convert(data, tp, where, _dec_hook)
    if isinstance(obj, Environment):
        check_facts(obj, where)
    return obj


def check_facts(env: Environment, where: str) -> None:
    """ValueError naming a fact the analysis reads whose value has another type (``facts.py``'s tables)."""
    places: list[tuple[str, str | None, Facts]] = [(f"{where}.gpus[{i}].facts", None, g.facts)
                                                   for i, g in enumerate(env.gpus)]
    places += [(f"{where}.sections.{name}", name, facts) for name, facts in env.sections.items()]
    for place, section, facts in places:
        for key, f in facts.items():
            tp = fact_type(section, key)
            if tp is not None and f.value is not None:
                convert(f.value, tp, f"{place}.{key}.value")
                low, high = GPU_FACT_RANGES.get(key, (0, math.inf)) if section is None else (0, math.inf)
                if high < math.inf and f.value != 0 and not low <= f.value < high:
                    raise ValueError(f"{place}.{key}.value: out of range (0, or from {low:g} to {high:g})")


def _kind(data: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(data), "a number")


def _obj(data: object, where: str) -> JSON:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object, got {_kind(data)}")
    return data


def _list(d: JSON, key: str, where: str) -> list[Json]:
    v = d.get(key)
    if v is not None and not isinstance(v, list):
        raise ValueError(f"{where}.{key}: expected a list, got {_kind(v)}")
    return v or []


def _legacy(text: object) -> JSON:
    return {"key": LEGACY_TEXT, "params": {"text": str(text)}}


_SETTINGS_1 = ("warmup_ms", "rep_ms", "min_samples", "max_samples", "cold_l2", "seed", "quick", "ops", "impls")


def v1_to_v2(data: JSON) -> JSON:
    """Schema 1's one ``bench`` as ``benches``: derived numbers dropped, ``error`` as ``accuracy``, an errored case
    a ``failure``, English text ``legacy.text`` notes, measured ceilings ``recorded_ceilings`` (no samples)."""
    bench = data.get("bench")
    b = _obj(bench, "bench") if bench is not None else {}
    out = {k: v for k, v in data.items() if k != "bench"}
    out["schema_version"] = 2
    out["benches"] = [] if not b else [{k: v for k, v in {
        "device": b.get("device"),
        "settings": {k: v for k, v in _obj(b.get("settings") or {}, "bench.settings").items() if k in _SETTINGS_1},
        "started": b.get("started"),
        "duration_s": b.get("duration_s"),
        "versions": b.get("versions") or {},
        "notes": [_legacy(n) for n in _list(b, "notes", "bench")],
        "skipped": [{**{k: s[k] for k in ("op", "impl", "dtype", "shape", "precision") if k in s},
                     "reason": _legacy(s.get("reason", ""))} for s in _list(b, "skipped", "bench") if isinstance(s, dict)],
        "recorded_ceilings": [{k: c.get(k) for k in ("name", "value", "unit", "source")}
                              for c in _list(b, "ceilings", "bench") if isinstance(c, dict) and c.get("kind") == "measured"],
        "cases": [_case_v1(_obj(c, f"bench.cases[{i}]"), b.get("device"), f"bench.cases[{i}]")
                  for i, c in enumerate(_list(b, "cases", "bench"))],
        "stop": {"cause": "legacy", "detail": b.get("interrupted")} if b.get("partial") or b.get("interrupted") else None,
    }.items() if v is not None}]
    return out


def _case_v1(c: JSON, device: object, where: str) -> JSON:
    out = {k: c[k] for k in ("op", "impl", "dtype", "precision", "shape", "compile_s", "monitor", "kernel")
           if c.get(k) is not None}
    for t in ("gpu", "launch"):
        if isinstance(c.get(t), dict):
            out[t] = {k: c[t][k] for k in ("method", "samples_us", "calls_per_sample") if k in c[t]}
    if isinstance(c.get("error"), dict):
        out["accuracy"] = {k: c["error"][k] for k in ("rel_l2", "max_abs") if k in c["error"]}
    if c.get("status") == "error":
        out["failure"] = {"stage": "run", "detail": str(c.get("message") or "unknown")}
    elif c.get("message"):
        out["notes"] = [_legacy(c["message"])]
    flags = c.get("flags")
    if flags is not None and (not isinstance(flags, list) or not all(isinstance(f, str) for f in flags)):
        raise ValueError(f"{where}.flags: expected a list of strings, got {_kind(flags)}")
    # Schema 1 did not record which cases kept L2 cold: one not flagged l2_resident whose working set fits in L2
    # was kept cold (what the flag meant), so it gets 2 sets.
    op, shape, dtype = c.get("op"), c.get("shape"), c.get("dtype")
    l2 = device.get("l2_bytes") if isinstance(device, dict) else None
    if (isinstance(op, str) and op in OPS and not spec(op).compute_bound and isinstance(shape, list)
            and "l2_resident" not in (flags or []) and isinstance(l2, int) and not isinstance(l2, bool)
            and isinstance(dtype, str)):
        with contextlib.suppress(ValueError, KeyError, TypeError, OverflowError):  # refused below, with the field
            spec(op).check_shape(tuple(shape))
            if spec(op).working_set_bytes(tuple(shape), dtype) <= l2:
                out["rotation_sets"] = 2
    return out


UPGRADES: dict[int, Callable[[JSON], JSON]] = {1: v1_to_v2}


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off while many objects and no cycles are made (a large report, an analysis): it would
    walk them all again every few hundred allocations."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def from_dict(data: Json, checked: bool = False) -> Report:
    """A Report from its JSON form, any schema version this tool knows (``checked``: numbers already checked)."""
    version = versioned(data, FORMAT_NAME, "schema_version", SCHEMA_VERSION, ReportError,
                        ("error.not_report", "error.report_newer", "error.version_unknown"))
    try:
        if not checked:
            check_numbers(data, ints=False)
        for v in range(version, SCHEMA_VERSION):
            if v in UPGRADES:
                data = {**UPGRADES[v](data), "schema_version": SCHEMA_VERSION}  # upgraded: written back as current
        with gc_paused():
            report = convert(data, Report, dec_hook=_dec_hook)
        for where, env in [("environment", report.environment), *(
                (f"fleet.nodes[{i}].environment", n.environment) for i, n in enumerate(report.fleet.nodes if report.fleet else ())
                if n.environment is not None)]:
            check_facts(env, where)
    except ValueError as e:
        raise ReportError("error.as_is", error=e) from None
    except (TypeError, LookupError, AttributeError, RecursionError) as e:  # a model check that tripped over a value
        raise ReportError("error.not_a", what="report", error=f"{e.__class__.__name__}: {e}") from None
    return report


def loads(text: str) -> Report:
    return from_dict(read_json(text, ReportError, "report"), checked=True)


def load(path: str | os.PathLike[str], kinds: tuple[str, ...] = KINDS) -> Report:
    """Read a report of one of ``kinds`` (JSON, or gzip-compressed); every failure is a ReportError naming the file."""
    p = Path(path)
    text = read_text(p, MAX_REPORT_BYTES, ReportError, "report")
    try:
        data = read_json(text, ReportError, "report")
        del text  # the text of a large report is as big as the model it becomes: not both at once
        report = from_dict(data, checked=True)
    except ReportError as e:
        raise ReportError("error.flag", flag=p, error=e) from None
    if report.kind not in kinds:
        raise ReportError("error.report_kind", path=p, kind=report.kind, kinds=kinds[:-1], last=kinds[-1])
    return report


__all__ = ["FORMAT_NAME", "Note", "build", "dump", "dumps", "from_dict", "load", "loads", "to_dict"]
