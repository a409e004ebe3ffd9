"""The report model: immutable dataclasses and their versioned JSON form.

A report is the single source of truth. Probes and benchmarks build one; the
renderers and the comparisons only read one. Nothing here probes, measures or
renders.

JSON format history (``schema_version``):
  1 - first format: environment sections + GPUs as facts, checks, bench cases
      with raw timing samples (2026-11).
"""

from __future__ import annotations

from envcheck.files import write_new
from envcheck.model.bench import (
    CATEGORIES,
    COMPUTE_BOUND_OPS,
    FLAGS,
    IMPLS,
    L2_RESIDENT,
    LAUNCH_BOUND,
    NOISY,
    THROTTLED,
    Bench,
    BenchDevice,
    Case,
    Ceiling,
    MonitorSummary,
    NumericError,
    Skip,
    Timing,
)
from envcheck.model.codec import FORMAT_NAME, build, dump, dumps, from_dict, load, loads, to_dict
from envcheck.model.facts import STATUSES, Check, Environment, Fact, Facts, Gpu, ReportError, Status, known, missing
from envcheck.model.report import SCHEMA_VERSION, Kind, Report

__all__ = [
    "CATEGORIES", "COMPUTE_BOUND_OPS", "FLAGS", "FORMAT_NAME", "IMPLS", "L2_RESIDENT", "LAUNCH_BOUND", "NOISY",
    "SCHEMA_VERSION", "STATUSES", "THROTTLED", "Bench", "BenchDevice", "Case", "Ceiling", "Check", "Environment",
    "Fact", "Facts", "Gpu", "Kind", "MonitorSummary", "NumericError", "Report", "ReportError", "Skip", "Status",
    "Timing", "build", "dump", "dumps", "from_dict", "known", "load", "loads", "missing", "to_dict", "write_new",
]
