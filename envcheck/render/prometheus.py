"""A report as a Prometheus textfile for node_exporter: its metrics, stable names and labels, in docs/outputs.md."""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable, Iterator
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
        yield _gauge("envcheck_info", "envcheck version and what the report is about",
                     ["version", "kind", "host", "gpu_name", "driver"],
                     [([__version__, report.kind, report.host, str(report.gpu_name or ""),
                        str(env.get("driver", "driver_version") or "")], 1)])
        ts = _timestamp(report.created)
        if ts is not None:
            yield GaugeMetricFamily("envcheck_report_timestamp_seconds", "when the report was made", value=ts)
        v = verdict(a)
        yield _gauge("envcheck_verdict_ok", "1 when the report passes", ["kind"], [([report.kind], 1 if v.ok else 0)])
        yield _gauge("envcheck_verdict_reasons", "reasons keeping the report from passing", ["reason"],
                     (([key], sum(r.key == key for r in v.reasons)) for key in REASON_KEYS))
        yield from self._checks()
        yield from self._cases()
        yield from self._node()
        yield from self._fleet()
        yield from self._burn()

    def _checks(self) -> Iterator[GaugeMetricFamily]:
        checks = self.a.report.checks
        if checks:
            yield _gauge("envcheck_check_status", "each health check's status", ["check", "status"],
                         (([c.id, c.status], 1) for c in checks))
            yield _gauge("envcheck_checks", "health checks by status", ["status"],
                         (([s], sum(c.status == s for c in checks)) for s in STATUSES))

    def _cases(self) -> Iterator[GaugeMetricFamily]:
        if not self.a.benches:
            return
        rows = [([str(ba.bench.device.index) if ba.bench.device.index is not None else ba.bench.device.backend,
                  r.case.op, r.case.impl, r.case.dtype, r.case.precision, "x".join(str(d) for d in r.case.shape)], r)
                for ba in self.a.benches for r in ba.results]
        yield _gauge("envcheck_case_ok", "1 when the benchmark case passed", CASE_LABELS,
                     ((labels, 1 if r.status == "pass" else 0) for labels, r in rows))
        yield _gauge("envcheck_case_gpu_time_seconds", "median time of one call", CASE_LABELS,
                     ((labels, r.time.stats.median * 1e-6) for labels, r in rows if r.time is not None))
        yield _gauge("envcheck_case_bandwidth_bytes_per_second", "achieved memory bandwidth", CASE_LABELS,
                     ((labels, r.gbps * 1e9) for labels, r in rows if r.gbps is not None))
        yield _gauge("envcheck_case_flops", "achieved FLOP/s", CASE_LABELS,
                     ((labels, r.tflops * 1e12) for labels, r in rows if r.tflops is not None))
        yield _gauge("envcheck_case_ceiling_ratio", "share of the ceiling the case is judged on",
                     [*CASE_LABELS, "ceiling"],
                     (([*labels, name], pct / 100.0) for labels, r in rows
                      for name, pct in (("theoretical", r.pct_theoretical), ("measured", r.pct_measured))
                      if pct is not None))

    def _node(self) -> Iterator[GaugeMetricFamily]:
        node = self.a.node
        if node is None:
            return
        yield GaugeMetricFamily("envcheck_node_ok", "1 when the node tests found no problem",
                                value=0 if node.problems else 1)
        yield _gauge("envcheck_collective_busbw_bytes_per_second", "collective bus bandwidth",
                     ["op", "size_bytes", "scope"],
                     (([row.op, str(row.size_bytes), sweep.collectives.scope], row.busbw_gbps * 1e9)
                      for sweep in node.sweeps for row in sweep.rows if row.busbw_gbps is not None))
        yield _gauge("envcheck_peer_copy_bytes_per_second", "peer and host copy bandwidth",
                     ["kind", "method", "src", "dst"],
                     (([c.kind, c.method, str(c.src), str(c.dst)], c.gbps * 1e9) for c in node.copies
                      if c.gbps is not None))

    def _fleet(self) -> Iterator[GaugeMetricFamily]:
        if self.a.fleet is not None:
            yield _gauge("envcheck_fleet_node_ok", "1 when the fleet's verdict on the node is pass", ["host"],
                         (([v.host], 1 if v.status == "pass" else 0) for v in self.a.fleet.verdicts))

    def _burn(self) -> Iterator[GaugeMetricFamily]:
        burn = self.a.burn
        if burn is None:
            return
        gpus = [([str(g.gpu.index)], g) for g in burn.gpus]
        yield _gauge("envcheck_burn_gpu_ok", "1 when the GPU held through the burn-in", ["gpu"],
                     ((gpu, 1 if g.status == "pass" else 0) for gpu, g in gpus))
        yield _gauge("envcheck_burn_gemm_flops", "median sustained GEMM FLOP/s", ["gpu"],
                     ((gpu, tf * 1e12) for gpu, g in gpus if (tf := g.rate("gemm")) is not None))
        yield _gauge("envcheck_burn_bandwidth_bytes_per_second", "median streaming bandwidth", ["gpu"],
                     ((gpu, gb * 1e9) for gpu, g in gpus if (gb := g.rate("bandwidth")) is not None))
        yield _gauge("envcheck_burn_power_ratio", "highest power over the enforced limit", ["gpu"],
                     ((gpu, g.power_share) for gpu, g in gpus if g.power_share is not None))


def _gauge(name: str, doc: str, labels: list[str], samples: Iterable[tuple[list[str], float]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in samples:
        family.add_metric(values, value)
    return family


def prometheus_text(analysis: Analysis) -> str:
    """The textfile's content (Prometheus text exposition format 0.0.4)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_ReportCollector(analysis))
    return generate_latest(reg).decode("utf-8")


def write_textfile(analysis: Analysis, path: Path) -> None:
    """Replace ``path`` whole: node_exporter must never read half a file, and a textfile is meant to be
    refreshed by each run. Our stage is a hidden folder, which the textfile collector (``*.prom``) skips."""
    replace_file(path, prometheus_text(analysis))
