"""The report model: immutable dataclasses of raw results and their versioned JSON; nothing derives or renders."""

from __future__ import annotations

from envcheck.files import write_new
from envcheck.model.bench import (
    LEGACY_TEXT,
    Accuracy,
    Bench,
    BenchDevice,
    Case,
    CaseKey,
    CeilingRun,
    Failure,
    MonitorSummary,
    MonitorWindow,
    Note,
    OutputAccuracy,
    RecordedCeiling,
    Samples,
    Settings,
    Skip,
    Stop,
    StopCause,
    Timing,
    legacy,
)
from envcheck.model.codec import FORMAT_NAME, build, dump, dumps, from_dict, load, loads, to_dict
from envcheck.model.facts import STATUSES, Check, Environment, Fact, Facts, Gpu, ReportError, Status, known, missing
from envcheck.model.report import KINDS, SCHEMA_VERSION, ReplaySource, Report
from envcheck.ops import IMPLS

__all__ = [
    "FORMAT_NAME", "IMPLS", "KINDS", "LEGACY_TEXT", "SCHEMA_VERSION", "STATUSES", "Accuracy", "OutputAccuracy", "Bench", "BenchDevice",
    "Case", "CaseKey", "CeilingRun", "Check", "Environment", "Fact", "Facts", "Failure", "Gpu", "MonitorSummary",
    "MonitorWindow", "Note", "RecordedCeiling", "ReplaySource", "Report", "ReportError", "Samples", "Settings", "Skip", "Status",
    "Stop", "StopCause", "Timing", "build", "dump", "dumps", "from_dict", "known", "legacy", "load", "loads",
    "missing", "to_dict", "write_new",
]
