"""A report as a Prometheus textfile for node_exporter's textfile collector.

Generated with ``prometheus_client`` (its exposition format and escaping, ``generate_latest``); the file
is written by envcheck's own atomic writer (``files.replace_file``), not ``write_to_textfile``: that one
neither fsyncs its temporary nor cleans up after a killed export.
Every metric is a gauge of the last run; names and labels are stable (dashboards and alerts depend on
them) and listed here:

| metric | labels | value |
|---|---|---|
| ``envcheck_info`` | ``version``, ``kind``, ``host``, ``gpu_name``, ``driver`` | 1 |
| ``envcheck_report_timestamp_seconds`` | | when the report was made (Unix time) |
| ``envcheck_verdict_ok`` | ``kind`` | 1 when the report passes (analysis/verdict.py), else 0 |
| ``envcheck_verdict_reasons`` | ``reason`` | how many reasons of each kind keep it from passing |
| ``envcheck_check_status`` | ``check``, ``status`` | 1 for the check's status (one series per check) |
| ``envcheck_checks`` | ``status`` | checks with each status |
| ``envcheck_case_ok`` | ``gpu``, ``op``, ``impl``, ``dtype``, ``precision``, ``shape`` | 1 pass, 0 not |
| ``envcheck_case_gpu_time_seconds`` | same | median GPU time of one call |
| ``envcheck_case_bandwidth_bytes_per_second`` | same | achieved memory bandwidth |
| ``envcheck_case_flops`` | same | achieved FLOP/s (compute-bound ops) |
| ``envcheck_case_ceiling_ratio`` | same, ``ceiling`` (``theoretical``, ``measured``) | share of the ceiling |
| ``envcheck_node_ok`` | | 1 when the node tests found no problem |
| ``envcheck_collective_busbw_bytes_per_second`` | ``op``, ``size_bytes``, ``scope`` | nccl-tests' bus bandwidth |
| ``envcheck_peer_copy_bytes_per_second`` | ``kind``, ``method``, ``src``, ``dst`` | copy bandwidth |
| ``envcheck_fleet_node_ok`` | ``host`` | 1 when the fleet's verdict on the node is pass |
| ``envcheck_burn_gpu_ok`` | ``gpu`` | 1 when the GPU held through the burn-in |
| ``envcheck_burn_gemm_flops`` | ``gpu`` | median sustained FLOP/s of the burn's GEMM phase |
| ``envcheck_burn_bandwidth_bytes_per_second`` | ``gpu`` | median of the streaming phase |
| ``envcheck_burn_power_ratio`` | ``gpu`` | highest power over the enforced limit |

Units are base units (seconds, bytes per second, FLOP/s), as Prometheus' naming guide asks. Label
values are the report's own strings, unseen characters made visible (``outside_text.visible``) and then
escaped by prometheus_client; ``--anonymize`` reports carry pseudonyms there too.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from envcheck import __version__
from envcheck.analysis import Analysis
from envcheck.analysis.verdict import REASON_KEYS, verdict
from envcheck.files import replace_file
from envcheck.model import STATUSES
from envcheck.outside_text import visible

CASE_LABELS = ["gpu", "op", "impl", "dtype", "precision", "shape"]


def _timestamp(created: str) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")))
    except (ValueError, TypeError):
        return None


class _ReportCollector(Collector):
    def __init__(self, analysis: Analysis) -> None:
        self.a = analysis

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for family in self._families():  # label values are the report's strings: shown as outside text is
            family.samples = [s._replace(labels={k: visible(v) for k, v in s.labels.items()}) for s in family.samples]
            yield family

    def _families(self) -> Iterator[GaugeMetricFamily]:
        a, report = self.a, self.a.report
        env = report.environment
        info = GaugeMetricFamily("envcheck_info", "envcheck version and what the report is about",
                                 labels=["version", "kind", "host", "gpu_name", "driver"])
        info.add_metric([__version__, report.kind, report.host, str(report.gpu_name or ""),
                         str(env.get("driver", "driver_version") or "")], 1)
        yield info
        ts = _timestamp(report.created)
        if ts is not None:
            yield GaugeMetricFamily("envcheck_report_timestamp_seconds", "when the report was made", value=ts)
        v = verdict(a)
        ok = GaugeMetricFamily("envcheck_verdict_ok", "1 when the report passes", labels=["kind"])
        ok.add_metric([report.kind], 1 if v.ok else 0)
        yield ok
        reasons = GaugeMetricFamily("envcheck_verdict_reasons", "reasons keeping the report from passing",
                                    labels=["reason"])
        for key in REASON_KEYS:
            reasons.add_metric([key], sum(r.key == key for r in v.reasons))
        yield reasons
        yield from self._checks()
        yield from self._cases()
        yield from self._node()
        yield from self._fleet()
        yield from self._burn()

    def _checks(self) -> Iterator[GaugeMetricFamily]:
        checks = self.a.report.checks
        if not checks:
            return
        each = GaugeMetricFamily("envcheck_check_status", "each health check's status", labels=["check", "status"])
        for c in checks:
            each.add_metric([c.id, c.status], 1)
        yield each
        counts = GaugeMetricFamily("envcheck_checks", "health checks by status", labels=["status"])
        for status in STATUSES:
            counts.add_metric([status], sum(c.status == status for c in checks))
        yield counts

    def _cases(self) -> Iterator[GaugeMetricFamily]:
        if not self.a.benches:
            return
        ok = GaugeMetricFamily("envcheck_case_ok", "1 when the benchmark case passed", labels=CASE_LABELS)
        t = GaugeMetricFamily("envcheck_case_gpu_time_seconds", "median time of one call", labels=CASE_LABELS)
        bw = GaugeMetricFamily("envcheck_case_bandwidth_bytes_per_second", "achieved memory bandwidth",
                               labels=CASE_LABELS)
        fl = GaugeMetricFamily("envcheck_case_flops", "achieved FLOP/s", labels=CASE_LABELS)
        share = GaugeMetricFamily("envcheck_case_ceiling_ratio", "share of the ceiling the case is judged on",
                                  labels=[*CASE_LABELS, "ceiling"])
        for ba in self.a.benches:
            gpu = str(ba.bench.device.index) if ba.bench.device.index is not None else ba.bench.device.backend
            for r in ba.results:
                c = r.case
                labels = [gpu, c.op, c.impl, c.dtype, c.precision, "x".join(str(d) for d in c.shape)]
                ok.add_metric(labels, 1 if r.status == "pass" else 0)
                if r.time is not None:
                    t.add_metric(labels, r.time.stats.median * 1e-6)
                if r.gbps is not None:
                    bw.add_metric(labels, r.gbps * 1e9)
                if r.tflops is not None:
                    fl.add_metric(labels, r.tflops * 1e12)
                for name, pct in (("theoretical", r.pct_theoretical), ("measured", r.pct_measured)):
                    if pct is not None:
                        share.add_metric([*labels, name], pct / 100.0)
        yield from (ok, t, bw, fl, share)

    def _node(self) -> Iterator[GaugeMetricFamily]:
        node = self.a.node
        if node is None:
            return
        yield GaugeMetricFamily("envcheck_node_ok", "1 when the node tests found no problem",
                                value=0 if node.problems else 1)
        busbw = GaugeMetricFamily("envcheck_collective_busbw_bytes_per_second", "collective bus bandwidth",
                                  labels=["op", "size_bytes", "scope"])
        for sweep in node.sweeps:
            scope = sweep.collectives.scope
            for row in sweep.rows:
                if row.busbw_gbps is not None:
                    busbw.add_metric([row.op, str(row.size_bytes), scope], row.busbw_gbps * 1e9)
        yield busbw
        copies = GaugeMetricFamily("envcheck_peer_copy_bytes_per_second", "peer and host copy bandwidth",
                                   labels=["kind", "method", "src", "dst"])
        for c in node.copies:
            if c.gbps is not None:
                copies.add_metric([c.kind, c.method, str(c.src), str(c.dst)], c.gbps * 1e9)
        yield copies

    def _fleet(self) -> Iterator[GaugeMetricFamily]:
        fleet = self.a.fleet
        if fleet is None:
            return
        nodes = GaugeMetricFamily("envcheck_fleet_node_ok", "1 when the fleet's verdict on the node is pass",
                                  labels=["host"])
        for v in fleet.verdicts:
            nodes.add_metric([v.host], 1 if v.status == "pass" else 0)
        yield nodes


    def _burn(self) -> Iterator[GaugeMetricFamily]:
        burn = self.a.burn
        if burn is None:
            return
        ok = GaugeMetricFamily("envcheck_burn_gpu_ok", "1 when the GPU held through the burn-in", labels=["gpu"])
        flops = GaugeMetricFamily("envcheck_burn_gemm_flops", "median sustained GEMM FLOP/s", labels=["gpu"])
        bw = GaugeMetricFamily("envcheck_burn_bandwidth_bytes_per_second", "median streaming bandwidth",
                               labels=["gpu"])
        power = GaugeMetricFamily("envcheck_burn_power_ratio", "highest power over the enforced limit",
                                  labels=["gpu"])
        for g in burn.gpus:
            gpu = str(g.gpu.index)
            ok.add_metric([gpu], 1 if g.status == "pass" else 0)
            if (tf := g.rate("gemm")) is not None:
                flops.add_metric([gpu], tf * 1e12)
            if (gb := g.rate("bandwidth")) is not None:
                bw.add_metric([gpu], gb * 1e9)
            if g.power_share is not None:
                power.add_metric([gpu], g.power_share)
        yield from (ok, flops, bw, power)


def registry(analysis: Analysis) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_ReportCollector(analysis))
    return reg


def prometheus_text(analysis: Analysis) -> str:
    """The textfile's content (Prometheus text exposition format 0.0.4)."""
    return generate_latest(registry(analysis)).decode("utf-8")


def write_textfile(analysis: Analysis, path: Path) -> None:
    """Replace ``path`` whole: node_exporter must never read half a file, and a textfile is meant to be
    refreshed by each run. Our stage is a hidden folder, which the textfile collector (``*.prom``) skips."""
    replace_file(path, prometheus_text(analysis))
