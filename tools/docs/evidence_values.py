"""What the docs' markers compute (``tools/docs/doc_numbers.py``): readers of the committed evidence and the few
numbers several pages quote from it. Every public name here can be called from a marker; each reads the files
under ``evidence/`` and derives what it returns through envcheck's own analysis, never from a number typed in.

Numbers are returned unrounded: the marker's format rounds them, once, where they are written.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from envcheck import model
from envcheck.analysis import Analysis, analyse
from envcheck.analysis.burn import BurnAnalysis

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "evidence"


# --------------------------------------------------------------------------- files


def _path(name: str) -> Path:
    """``name`` under ``evidence/`` (``device-logs/...`` for a log); a path outside it is refused."""
    path = (EVIDENCE / name).resolve()
    if not path.is_relative_to(ROOT) or not path.is_file():
        raise FileNotFoundError(f"no evidence file {name}")
    return path


@functools.cache
def text(name: str) -> str:
    """A committed file's text (gzip undone)."""
    raw = _path(name).read_bytes()
    return (gzip.decompress(raw) if name.endswith(".gz") else raw).decode("utf-8")


@functools.cache
def data(name: str) -> Any:
    """A committed JSON file (a diff's, a report's raw form)."""
    return json.loads(text(name))


@functools.cache
def report(name: str) -> model.Report:
    return model.load(_path(name))


@functools.cache
def analysed(name: str) -> Analysis:
    return analyse(report(name))


def find(name: str, pattern: str, group: int | str = 1) -> Any:
    """The first match of ``pattern`` in a committed file: its group as a number where it reads as one."""
    m = re.search(pattern, text(name), re.M)
    if m is None:
        raise LookupError(f"{pattern!r} not found in {name}")
    return _number(m.group(group))


def findall(name: str, pattern: str, numbers: bool = True) -> list[Any]:
    """Every match's first group (or the match), as numbers where they read as numbers (``numbers``), else as
    the file writes them."""
    found = [m.group(1) if m.groups() else m.group(0) for m in re.finditer(pattern, text(name), re.M)]
    return [_number(f) for f in found] if numbers else found


def _number(s: str) -> Any:
    try:
        return int(s)
    except ValueError:
        try:
            return float(s)
        except ValueError:
            return s


def table(name: str, index: int = 0, after: str | None = None) -> list[dict[str, str]]:
    """The rows of the ``index``-th Markdown table of a committed file (counted after the first line matching
    ``after``), each a dict by the header's cells."""
    lines = text(name).splitlines()
    if after is not None:
        start = next((i for i, line in enumerate(lines) if re.search(after, line)), None)
        if start is None:
            raise LookupError(f"{after!r} not found in {name}")
        lines = lines[start:]
    tables: list[list[dict[str, str]]] = []
    head: list[str] | None = None
    for line in [*lines, ""]:
        if not line.startswith("|"):
            head = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if head is None:
            head = cells
            tables.append([])
        elif not set("".join(cells)) <= set("-: "):
            tables[-1].append(dict(zip(head, cells, strict=False)))
    if index >= len(tables):
        raise LookupError(f"{name} has {len(tables)} table(s) there, not {index + 1}")
    return tables[index]


def member(archive: str, inner: str) -> str:
    """One file of a committed ``.tgz``, as text."""
    with tarfile.open(_path(archive)) as tar:
        f = tar.extractfile(inner)
        if f is None:
            raise LookupError(f"{inner} is not a file in {archive}")
        return io.TextIOWrapper(f, encoding="utf-8").read()


def of(part: int, whole: int) -> str:
    """``9 of 16``."""
    return f"{part} of {whole}"


# --------------------------------------------------------------------------- burns


_CONTROL = re.compile(r"_control-(?P<control>[a-z_]+)-gpu(?P<gpu>\d+)\.json\.gz$")


def burns(healthy: bool | None = None) -> list[str]:
    """The committed burns judged by today's rules (not the one from before the checksum fix), oldest first;
    ``healthy``: only those without (True) or with (False) a planted fault."""
    names = sorted(p.name for p in EVIDENCE.glob("*_burn*.json.gz") if "before-checksum-fix" not in p.name)
    return [n for n in names if healthy is None or (_CONTROL.search(n) is None) == healthy]


def burn(name: str) -> BurnAnalysis:
    a = analysed(name).burn
    if a is None:
        raise LookupError(f"{name} holds no burn")
    return a


def burn_gpus(name: str) -> list[Any]:
    """The GPUs of a burn that ran no control."""
    return [g for g in burn(name).gpus if g.gpu.control is None]


def margins(rule: str, names: list[str] | None = None, field: str = "value") -> list[float]:
    """Every uncontrolled GPU's margin on ``rule`` over the healthy burns (or ``names``): its ``value``
    (percent below, for a speed rule) or its ``room``."""
    return [getattr(m, field) for n in (names if names is not None else burns(healthy=True)) for g in burn_gpus(n)
            for m in g.margins if m.rule == rule]


def per_gpu(name: str, path: str) -> list[Any]:
    """One value of each GPU of a burn (``analysis.burn.GpuBurn``), by a dotted path through attributes and keys:
    ``rates.gemm.median``, ``power_share``, ``gpu.sdc.iterations``."""
    out = []
    for g in burn(name).gpus:
        x: Any = g
        for part in path.split("."):
            x = x[part] if isinstance(x, dict) or hasattr(x, "keys") else getattr(x, part)
        out.append(x)
    return out


def rooms(name: str, rule: str) -> list[float]:
    """Each uncontrolled GPU's room on ``rule`` (points; negative: it fired)."""
    return [m.room for g in burn_gpus(name) for m in g.margins if m.rule == rule]


def least_room(rule: str, names: list[str] | None = None) -> float:
    """The least room on ``rule`` over the healthy burns' GPUs (or over ``names``)."""
    return min(margins(rule, names, "room"))


def gemm_rates(names: list[str] | None = None, kind: str = "median") -> list[float]:
    """Every uncontrolled GPU's GEMM rate of the healthy burns: ``median`` (sustained), ``best`` (the cold
    best interval) or ``settled`` (the 95th percentile after the first third)."""
    return [getattr(g.rates["gemm"], kind) for n in (names if names is not None else burns(healthy=True))
            for g in burn_gpus(n)]


def settled_above_median(names: list[str] | None = None) -> list[float]:
    """How far each healthy GPU's settled rate sits above its median, percent."""
    return [100 * (s / m - 1) for s, m in zip(gemm_rates(names, "settled"), gemm_rates(names), strict=True)]


def span(values: list[float]) -> tuple[float, float]:
    return min(values), max(values)


def burn_gpu_count(names: list[str] | None = None) -> int:
    return sum(len(burn(n).gpus) for n in (names if names is not None else burns(healthy=True)))


def controls_caught(control: str) -> tuple[int, int]:
    """(caught, ran) of the committed burns that planted ``control``: the planted GPU fails with its finding
    and every other GPU passes."""
    caught_by = {"slow_gemm": "below_siblings", "flip_bit": "sdc"}[control]
    ran = caught = 0
    for n in burns(healthy=False):
        m = _CONTROL.search(n)
        if m is None or m["control"] != control:
            continue
        ran += 1
        gpus = burn(n).gpus
        caught += all((caught_by in {f.key for f in g.findings}) if g.gpu.index == int(m["gpu"]) else g.status == "pass"
                      for g in gpus)
    return caught, ran


def _cell(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def burn_table() -> str:
    """The burns' table of docs/burn.md: each committed burn judged by today's rules."""
    head = ("| report | machine | burn | min | verdict | GEMM TFLOP/s | cold best | room: own settled | room: siblings "
            "| room: power | findings |\n|---|---|---|--:|---|---|---|--:|--:|--:|---|\n")
    rows = []
    for n in burns():
        a = burn(n)
        m = _CONTROL.search(n)
        what = "healthy" if m is None else f"control {m['control']} on GPU {m['gpu']}"
        stamp = n[:16]
        machine = re.search(r"_vm_(\w+-h\d00)_", n)[1]  # type: ignore[index]
        rates = [g.rates["gemm"] for g in a.gpus]

        def least(rule: str, name: str = n) -> str:
            r = rooms(name, rule)
            return _cell(min(r) if r else None, ".1f")

        findings = "; ".join(f"GPU {g.gpu.index}: {f.key}" + (f" {f.params['below_pct']:.1f}%" if "below_pct" in f.params
                                                               else "")
                             for g in a.gpus for f in g.findings) or "none"
        rows.append(f"| [{stamp}](../evidence/{n}) | {machine} | {what} | {a.burn.minutes:g} | {a.verdict} "
                    f"| {', '.join(format(r.median, '.0f') for r in rates)} | {', '.join(format(r.best, '.0f') for r in rates)} "
                    f"| {least('ceiling_margin')} | {least('sibling_margin')} | {least('power_share')} | {findings} |")
    return head + "\n".join(rows) + "\n"


# --------------------------------------------------------------------------- node runs against nccl-tests


def _ratio_rows(name: str, modes: tuple[str, ...] | None = None, after: str | None = None) -> list[dict[str, str]]:
    """The rows of a ``compare_node.py`` table (its first, or the first after a line matching ``after``) that hold
    a ratio, in ``modes`` when given."""
    out = []
    for r in table(name, after=after):
        if r.get("ratio", "-") in ("-", ""):
            continue
        if modes is not None and not any(r["mode"].startswith(m) and (r["mode"] == m or r["mode"][len(m)] == ",")
                                         for m in modes):
            continue
        out.append(r)
    return out


def mib(row: dict[str, str]) -> int:
    return int(row["size"].split()[0])


def within(name: str, modes: tuple[str, ...] | None = None, below_mib: int | None = None,
           from_mib: int | None = None, after: str | None = None) -> tuple[int, int]:
    """(rows within the bar, rows) of a ``compare_node.py`` table, for ``modes`` and sizes in range."""
    rows = [r for r in _ratio_rows(name, modes, after)
            if (below_mib is None or mib(r) < below_mib) and (from_mib is None or mib(r) >= from_mib)]
    return sum(r["within"] == "yes" for r in rows), len(rows)


def _share_of_bar(row: dict[str, str]) -> float:
    return abs(float(row["ratio"]) - 1) * 100 / float(row["bar"].split()[0])


def furthest_off(name: str, modes: tuple[str, ...] | None = None, after: str | None = None) -> str:
    """The row furthest off its bar (the largest share of its bar its ratio uses; every row tied with it), as
    ``op size ratio``."""
    rows = _ratio_rows(name, modes, after)
    top = max(_share_of_bar(r) for r in rows)
    return ", ".join(f"{r['op']} {size_label(r['size'])} {r['ratio']}" for r in rows if _share_of_bar(r) > top - 1e-9)


def size_label(size: str) -> str:
    """``4096 MiB`` -> ``4 GiB`` (as the docs write sizes)."""
    n, unit = size.split()
    return f"{int(n) // 1024} GiB" if unit == "MiB" and int(n) >= 1024 and int(n) % 1024 == 0 else size


def misses(name: str, after: str | None = None) -> str:
    """The rows outside their bar, ``op size ratio``, or ``none``."""
    return ", ".join(f"{r['op']} {size_label(r['size'])} {r['ratio']}" for r in _ratio_rows(name, after=after)
                     if r["within"] != "yes") or "none"


def copy_gbps(name: str, kind: str = "d2d", method: str = "copy_engine", directions: int = 1) -> list[float]:
    """A node run's copies of one kind (``d2d``, ``h2d``, ``d2h``), GB/s each."""
    node = analysed(name).node
    return [c.gbps for c in (node.copies if node else ())
            if (c.kind, c.method, c.directions) == (kind, method, directions) and c.gbps is not None]


# --------------------------------------------------------------------------- diffs


@functools.cache
def diff(baseline: str, other: str) -> tuple[dict[str, Any], ...]:
    """Today's ``envcheck diff`` of two committed reports: its rows as ``diff --format json`` writes them."""
    from envcheck.compare.diff import diff_analysed
    from envcheck.compare.export import to_json

    d = diff_analysed([(Path(baseline).name, analysed(baseline)), (Path(other).name, analysed(other))])
    return tuple(json.loads(to_json(d))["comparisons"][0]["cases"])


def committed_diff(name: str) -> tuple[dict[str, Any], ...]:
    """The rows of a committed diff JSON (one comparison)."""
    return tuple(data(name)["comparisons"][0]["cases"])


def called(rows: tuple[dict[str, Any], ...], verdict: str | None = None) -> int:
    """Rows called slower or faster (or only ``verdict``)."""
    return sum(r["verdict"] == verdict if verdict else r["verdict"] in ("slower", "faster") for r in rows)


def excluding_one(rows: tuple[dict[str, Any], ...]) -> int:
    """Rows whose 95% interval excludes 1."""
    return sum(r["low"] is not None and (r["low"] > 1 or r["high"] < 1) for r in rows)


def judged(rows: tuple[dict[str, Any], ...]) -> int:
    """Rows with an interval."""
    return sum(r["low"] is not None for r in rows)


def ratios(rows: tuple[dict[str, Any], ...], verdict: str = "slower") -> tuple[float, float]:
    return span([r["ratio"] for r in rows if r["verdict"] == verdict])



def controls(prefix: str, against: str = "rerun") -> tuple[dict[str, Any], ...]:
    """Today's diff of a committed control triple (``2026-11-26_0024Z_vm_h200``): baseline against its rerun
    (the negative control) or its control (the positive)."""
    return diff(f"{prefix}_controls_baseline.json.gz", f"{prefix}_controls_{against}.json.gz")


# --------------------------------------------------------------------------- commands, as a user runs them


def output(argv: str, *select: str | tuple[str, int], width: int = 104) -> str:
    """What ``envcheck ARGV`` prints (stdout and stderr, in a fresh process, a throwaway home and reports
    folder, ``width`` columns), as a fenced block: the lines ``select`` picks, each pattern the first line at
    or after the last one picked that matches (a ``(pattern, n)`` pair takes that line and the n-1 after it);
    every line when nothing is selected. Only for commands whose output is the same on any machine."""
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVCHECK_", "COLUMNS", "LINES"))}
        env |= {"HOME": home, "ENVCHECK_REPORTS_DIR": str(Path(home) / "reports"), "COLUMNS": str(width),
                "NO_COLOR": "1", "TERM": "dumb"}
        done = subprocess.run([sys.executable, "-m", "envcheck", *argv.split()], cwd=ROOT, env=env, text=True,
                              capture_output=True, timeout=300, check=False)
    lines = (done.stdout + done.stderr).rstrip("\n").splitlines()
    if select:
        picked, at = [], 0
        for s in select:
            pattern, count = (s, 1) if isinstance(s, str) else s
            i = next((k for k in range(at, len(lines)) if re.search(pattern, lines[k])), None)
            if i is None:
                raise LookupError(f"envcheck {argv}: no line matching {pattern!r} after line {at}")
            picked += lines[i:i + count]
            at = i + count
        lines = picked
    return "```\n" + "\n".join(line.rstrip() for line in lines) + "\n```\n"


def burn_vs_loop(run: str) -> list[str]:
    """A device burn log's (``1730Z_4x-h200``) burn rate against the independent GEMM loop, percent per GPU,
    as the log writes them."""
    return findall(f"device-logs/2026-11-28_{run}_device_burn.log.gz", r"independent loop [0-9.]+: (-?[0-9.]+)%",
                   numbers=False)


def negative(name: str) -> str:
    """A committed negative control's ``rows called / intervals excluding 1 of rows``."""
    rows = committed_diff(name)
    return f"{called(rows)} / {excluding_one(rows)} of {len(rows)}"


def planted(rows: tuple[dict[str, Any], ...]) -> str:
    """A positive control's ``called slower of planted`` (Triton's vector add rows: the control's)."""
    mine = [r for r in rows if (r["op"], r["impl"]) == ("vector_add", "triton")]
    return of(called(tuple(mine), "slower"), len(mine))


def excluding(rows: tuple[dict[str, Any], ...]) -> str:
    """``12 of 254``: rows whose interval excludes 1, of the rows with an interval."""
    return of(excluding_one(rows), judged(rows))


def excluding_pct(rows: tuple[dict[str, Any], ...]) -> float:
    return 100 * excluding_one(rows) / judged(rows)


def floor_pct(model_name: str, kind: str) -> float:
    """A shipped noise floor (``envcheck/compare/noise_floors.json``, learned from the committed pairs) as the
    diff shows it: one standard deviation of a row's time ratio, percent."""
    import math

    from envcheck.compare import shipped

    floors = shipped.for_model(model_name)
    if floors is None:
        raise LookupError(f"no noise floors shipped for {model_name}")
    return 100 * math.expm1(floors.kinds[kind].log_sd)


def floor_pcts(model_name: str, prefixes: tuple[str, ...]) -> list[float]:
    """Every shipped floor of ``model_name`` a diff uses (learned from enough rows) whose kind starts with one of
    ``prefixes``."""
    from envcheck.compare import shipped, stats

    floors = shipped.for_model(model_name)
    return [floor_pct(model_name, k) for k, f in (floors.kinds if floors else {}).items()
            if k.startswith(prefixes) and f.rows >= stats.MIN_FLOOR_CASES]


def cases(name: str, op: str | None = None, sustained: bool | None = None) -> list[Any]:
    """A report's measured cases (its first GPU's), of ``op``; ``sustained``: only those timed sustained
    (``case.sustained`` note) or only those not."""
    bench = report(name).bench
    out = [c for c in (bench.cases if bench else ()) if op is None or c.op == op]
    if sustained is not None:
        out = [c for c in out if any(n.key == "case.sustained" for n in c.notes) == sustained]
    return out


# --------------------------------------------------------------------------- collectives outside a report


def nccl(name: str, section: str, size_bytes: int, field: str = "busbw", in_place: bool = False) -> float:
    """One number of an nccl-tests output kept as a log: the row of ``size_bytes`` in the first ``== ...``
    section matching ``section`` (a regex); ``field`` ``time`` (us), ``algbw`` or ``busbw`` (GB/s), out of
    place unless ``in_place``."""
    inside = False
    for line in text(name).splitlines():
        if line.startswith("=="):
            inside = re.search(section, line) is not None
            continue
        cells = line.split()
        if inside and cells and cells[0] == str(size_bytes):
            # size count type redop root | time algbw busbw #wrong (out of place) | the same in place
            at = {"time": 5, "algbw": 6, "busbw": 7}[field] + (4 if in_place else 0)
            return float(cells[at])
    raise LookupError(f"no {size_bytes} in a section matching {section!r} of {name}")


def sweep_time_us(archive: str, op: str, size_bytes: int, registered: bool = False) -> float:
    """envcheck's GPU time of one call (``analysis.collectives``) from the ranks' result events kept in a
    committed ``.tgz`` (``rank0.jsonl``, ...): on plain buffers, or on NCCL-registered ones."""
    from envcheck.analysis.collectives import gpu_time_us, registered_time_us
    from envcheck.model.bench import Timing
    from envcheck.model.node import CollectiveResult, RankTiming

    with tarfile.open(_path(archive)) as tar:
        ranks = sorted(m.name for m in tar.getmembers() if re.fullmatch(r"rank\d+\.jsonl", m.name))
    events = {}
    for inner in ranks:
        for line in member(archive, inner).splitlines():
            e = json.loads(line)
            if e.get("event") == "result" and e.get("op") == op and e.get("size_bytes") == size_bytes:
                events[int(inner[4:-6])] = e
    if not events:
        raise LookupError(f"no {op} {size_bytes} in {archive}")
    first = next(iter(events.values()))

    def timings(key: str, calls: str) -> tuple[RankTiming, ...]:
        return tuple(RankTiming(r, Timing.from_samples("cuda_graph", e[key], int(e.get(calls) or 1)))
                     for r, e in sorted(events.items()))

    result = CollectiveResult(op, size_bytes, first["count"], "float32", tuple(sorted(events)),
                              gpu_timings=timings("gpu_samples_us", "gpu_calls"),
                              allocations=first.get("allocations", 1), captures=first.get("captures", 1),
                              communicators=first.get("communicators", 1),
                              registered_timings=timings("reg_samples_us", "reg_calls") if registered else (),
                              registered_captures=first.get("reg_captures", 1))
    value = registered_time_us(result) if registered else gpu_time_us(result)
    if value is None:
        raise LookupError(f"no GPU time for {op} {size_bytes} in {archive}")
    return value


def node_runs(kind: str, first: str, last: str, day: str = "2026-11-26") -> list[str]:
    """The committed node runs of one machine kind (``2x-h100``) from stamp ``first`` to ``last`` (``1309Z``)."""
    names = sorted(p.name for p in EVIDENCE.glob(f"{day}_*_vm_{kind}_node.json.gz"))
    return [n for n in names if first <= n[len(day) + 1:len(day) + 6] <= last]


def collective(name: str, op: str, size_bytes: int, scope: str = "node") -> Any:
    """One collective's row (``analysis.collectives.CollectiveRow``) of a committed node run's sweep."""
    node = analysed(name).node
    for sweep in node.sweeps if node is not None else ():
        if sweep.collectives.scope == scope:
            for r in sweep.rows:
                if (r.op, r.size_bytes) == (op, size_bytes):
                    return r
    raise LookupError(f"no {op} {size_bytes} in {name}")


def collectives(names: list[str], op: str, size_bytes: int) -> list[Any]:
    return [collective(n, op, size_bytes) for n in names]


def cell(rows: list[dict[str, str]], column: str, **match: str) -> Any:
    """The ``column`` of the one row whose cells equal ``match`` (``op="all_gather", size="64 MiB"``)."""
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    if len(found) != 1:
        raise LookupError(f"{len(found)} rows match {match}")
    return _number(found[0][column])


def timer_ratios(name: str) -> dict[str, float]:
    """``tools/evidence/verify_timer.py``'s table kept as a log: each row's (case and implementation) ratio of
    envcheck's GPU time to ``do_bench_cudagraph``'s."""
    rows = re.findall(r"^(\w+ \w+ \S+)\s+(\w+)\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)\s", text(name), re.M)
    return {f"{case} {impl}": float(ratio) for case, impl, ratio in rows}


def within_pct(ratios: dict[str, float], pct: float, skip: str | None = None) -> tuple[int, int]:
    """(rows within ``pct`` percent of 1, rows), rows matching ``skip`` left out."""
    xs = [r for k, r in ratios.items() if skip is None or not re.search(skip, k)]
    return sum(abs(r - 1) * 100 <= pct for r in xs), len(xs)


def largest_off_pct(ratios: dict[str, float], skip: str | None = None) -> float:
    return max(abs(r - 1) * 100 for k, r in ratios.items() if skip is None or not re.search(skip, k))


def case(name: str, op: str, impl: str, dtype: str, shape: tuple[int, ...], precision: str | None = None) -> Any:
    """One case's results (``analysis.results.CaseResult``) of a committed report's first GPU."""
    bench = analysed(name).bench
    found = [r for r in (bench.results if bench else ()) if (r.case.op, r.case.impl, r.case.dtype, r.case.shape) ==
             (op, impl, dtype, tuple(shape)) and precision in (None, r.case.precision)]
    if len(found) != 1:
        raise LookupError(f"{len(found)} cases {op} {impl} {dtype} {shape} in {name}")
    return found[0]


def ceiling(name: str, what: str = "bandwidth", kind: str = "theoretical") -> float:
    """A committed report's ceiling (first GPU): ``what`` ``bandwidth`` or a precision, ``kind`` ``theoretical``
    or ``measured``."""
    bench = analysed(name).bench
    c = bench.ceilings.get(what, kind) if bench else None
    if c is None:
        raise LookupError(f"no {kind} {what} ceiling in {name}")
    return c.value


def corpus_size() -> int:
    """The snapshots of real machines the tests replay (``tests/fixtures/snapshots/corpus``)."""
    return len(list((ROOT / "tests" / "fixtures" / "snapshots" / "corpus").glob("*.json")))
