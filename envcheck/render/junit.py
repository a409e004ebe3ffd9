"""JUnit XML: a report as the test results CI systems read, a suite per part of it (docs/outputs.md)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from envcheck.analysis import Analysis, BenchAnalysis, CaseResult
from envcheck.analysis.verdict import verdict
from envcheck.render import fmt
from envcheck.render.escape import visible
from envcheck.render.i18n import phrase, t


def _text(x: object) -> str:
    """One line of machine text, safe as XML (``visible`` escapes what XML 1.0 cannot hold too)."""
    return visible(str(x))


def _lines(parts: Sequence[object]) -> str:
    return "\n".join(_text(p) for p in parts)


class _Suite:
    def __init__(self, name: str) -> None:
        self.el = ET.Element("testsuite", name=name)
        self.counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        self.time = 0.0

    def case(self, classname: str, name: str, *, failure: str | None = None, error: str | None = None,
             skipped: str | None = None, out: Sequence[object] = (), detail: Sequence[object] = (),
             time_s: float | None = None) -> None:
        tc = ET.SubElement(self.el, "testcase", classname=_text(classname), name=_text(name))
        if time_s is not None:
            tc.set("time", f"{time_s:.9f}")
            self.time += time_s
        self.counts["tests"] += 1
        for tag, count, message, kind in (("failure", "failures", failure, "fail"), ("error", "errors", error, "error"),
                                          ("skipped", "skipped", skipped, None)):
            if message is not None:
                self.counts[count] += 1
                el = ET.SubElement(tc, tag, message=_text(message), **({"type": kind} if kind else {}))
                el.text = _lines(detail) if detail and kind else None
                break
        if out:
            ET.SubElement(tc, "system-out").text = _lines(out)

    def done(self, timestamp: str, hostname: str) -> ET.Element:
        for k, n in self.counts.items():
            self.el.set(k, str(n))
        self.el.set("time", f"{self.time:.6f}")
        self.el.set("timestamp", timestamp)
        self.el.set("hostname", _text(hostname))
        return self.el


def _verdict_suite(a: Analysis, carried: bool) -> _Suite:
    """``carried``: another case already fails or errs with the verdict's problem: it is not counted twice."""
    v = verdict(a)
    s = _Suite("envcheck.verdict")
    lines = [t(f"verdict.reason.{r.key}", **r.values) for r in v.reasons]
    if lines and carried:
        s.case("envcheck", f"{a.report.kind}", out=[t("junit.verdict_carried"), *lines])
    else:
        s.case("envcheck", f"{a.report.kind}", failure=lines[0] if lines else None, detail=lines)
    return s


def _checks_suite(a: Analysis) -> _Suite | None:
    if not a.report.checks:
        return None
    s = _Suite("envcheck.checks")
    for c in a.report.checks:
        subject = c.id.split(".", 1)[0]
        name = f"{c.id}: {c.title}"
        detail = [c.finding, *([f"fix: {c.fix}"] if c.fix else []), *(c.details.splitlines() if c.details else [])]
        if c.status == "fail":
            s.case(f"envcheck.check.{subject}", name, failure=c.finding, detail=detail)
        elif c.status == "skip":
            s.case(f"envcheck.check.{subject}", name, skipped=c.finding)
        else:
            s.case(f"envcheck.check.{subject}", name, out=[f"{c.status.upper()}: {c.finding}", *detail[1:]])
    return s


def _numbers(r: CaseResult) -> str:
    parts = []
    if r.time is not None:
        parts.append(f"median {fmt.num(r.time.stats.median, 4)} us ({r.time.method})")
    if r.gbps is not None:
        parts.append(f"{fmt.num(r.gbps, 4)} GB/s")
    if r.tflops is not None:
        parts.append(f"{fmt.num(r.tflops, 4)} TFLOP/s")
    for label, pct in (("theoretical", r.pct_theoretical), ("measured", r.pct_measured)):
        if pct is not None:
            parts.append(f"{fmt.num(pct, 3)}% of the {label} {r.ceiling_name} ceiling")
    if r.speedup is not None:
        parts.append(f"{fmt.num(r.speedup, 3)}x the reference implementation")
    if r.verdict is not None:
        parts.append(f"err/bound {fmt.ratio_pct(r.verdict.ratio)}")
    if r.flags:
        parts.append("flags: " + ", ".join(r.flags))
    return "; ".join(parts)


def _bench_suite(ba: BenchAnalysis) -> _Suite:
    dev = ba.bench.device
    s = _Suite(f"envcheck.gpu{dev.index}" if dev.index is not None else f"envcheck.{dev.backend}")
    props = ET.SubElement(s.el, "properties")
    for k, val in (("device", dev.name), ("uuid", dev.uuid), ("backend", dev.backend)):
        if val:
            ET.SubElement(props, "property", name=k, value=_text(val))
    for r in ba.results:
        c = r.case
        name = f"{c.impl} {c.dtype}/{c.precision} {'x'.join(str(d) for d in c.shape)}"
        time_s = r.time.stats.median * 1e-6 if r.time is not None else None
        if r.status == "error":
            failure = r.case.failure
            s.case(c.op, name, error=f"not measured ({failure.stage})" if failure else "not measured",
                   detail=[failure.detail] if failure else ())
        elif r.status != "pass":
            broken = ", ".join(r.verdict.broken) if r.verdict else r.status
            s.case(c.op, name, failure=f"accuracy bound broken: {broken}", detail=[_numbers(r)],
                   time_s=time_s)
        else:
            s.case(c.op, name, out=[_numbers(r)], time_s=time_s)
    if ba.bench.stop is not None:
        st = ba.bench.stop
        s.case("envcheck.run", "finished every planned case",
               failure=f"stopped ({st.cause.value}) after {st.finished} of {st.planned} cases")
    return s


def _node_suite(a: Analysis) -> _Suite | None:
    node = a.node
    if node is None:
        return None
    s = _Suite("envcheck.node")
    for sweep in node.sweeps:
        for row in sweep.rows:
            name = f"{row.op} {fmt.nbytes(row.size_bytes)}"
            out = [f"busbw {fmt.num(row.busbw_gbps, 4)} GB/s"] if row.busbw_gbps is not None else []
            if row.status in ("wrong", "error"):
                s.case("envcheck.collective", name, failure=f"collective {row.status}", detail=out)
            elif row.status == "skipped":
                s.case("envcheck.collective", name, skipped="not run")
            else:
                s.case("envcheck.collective", name, out=out)
    for c in node.copies:
        name = f"{c.kind} {c.method} {c.src}->{c.dst}"
        out = [f"{fmt.num(c.gbps, 4)} GB/s"] if c.gbps is not None else []
        if c.error or c.wrong:
            s.case("envcheck.copy", name, failure=c.error or f"{c.wrong} wrong elements", detail=out)
        else:
            s.case("envcheck.copy", name, out=out)
    problems = [t("junit.node_problem", problem=p.key, params=", ".join(
        f"{k}={v}" for k, v in p.params)) for p in node.problems]
    s.case("envcheck.node", "node.problems", failure=problems[0] if problems else None, detail=problems)
    return s


def _fleet_suite(a: Analysis) -> _Suite | None:
    if a.fleet is None:
        return None
    s = _Suite("envcheck.fleet")
    for v in a.fleet.verdicts:
        kinds = ", ".join(f.kind + (f" {f.metric}" if f.metric else "") for f in v.findings)
        s.case("envcheck.fleet.node", v.host, failure=None if v.status == "pass" else f"{v.status}: {kinds}")
    return s


def _burn_suite(a: Analysis) -> _Suite | None:
    if a.burn is None:
        return None
    s = _Suite("envcheck.burn")
    for g in a.burn.gpus:
        found = [phrase(f"burn.finding.{f.key}", f.params) for f in g.findings]
        numbers = [f"{phase}: median {fmt.num(g.rate(phase), 4)}" for phase in g.rates if g.rate(phase) is not None]
        if g.status == "pass":
            s.case("envcheck.burn.gpu", f"GPU {g.gpu.index}", out=numbers)
        else:
            s.case("envcheck.burn.gpu", f"GPU {g.gpu.index}", failure=found[0] if found else g.status,
                   detail=[*found, *numbers])
    for f in a.burn.findings:
        s.case("envcheck.burn.host", f.key, failure=f.key)
    return s


def junit_xml(a: Analysis) -> str:
    """The whole report as one ``<testsuites>`` document (UTF-8 text with its XML declaration)."""
    report = a.report
    parts = [s for s in (_checks_suite(a), *(_bench_suite(ba) for ba in a.benches), _node_suite(a),
                         _fleet_suite(a), _burn_suite(a)) if s is not None]
    suites = [_verdict_suite(a, any(s.counts["failures"] or s.counts["errors"] for s in parts)), *parts]
    root = ET.Element("testsuites", name=f"envcheck {report.kind} {_text(report.host)}")
    for s in suites:
        root.append(s.done(report.created, report.host))
    for k in ("tests", "failures", "errors"):
        root.set(k, str(sum(s.counts[k] for s in suites)))
    root.set("time", f"{sum(s.time for s in suites):.6f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
