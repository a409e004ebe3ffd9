"""Learn the noise floors envcheck ships (envcheck/compare/noise_floors.json) from committed controls.

Each argument pair is a negative control: two independent runs on one GPU, back to back,
nothing changed (same envcheck, PyTorch, Triton, driver and settings). Runs with repeats
(``run --repeat``, e.g. tools/evidence/controls.sh's baseline.json and rerun.json) count as
their first repeat: the floors are what a single run moves by. Every compared row's log
time ratio and within-run standard error go into its kinds (``diff.case_kinds``: op and size
category, op, size category, every row, each of one timing: GPU or launch time);
compare/shipped.py says how a kind's floor is computed from them and how a diff uses it. The file
records the pairs by file name, and the implementations their rows measured (the only ones a floor
is used for), so where a floor came from is in the data.

    PYTHONPATH=. python tools/evidence/noise_floors.py evidence/A.json evidence/B.json [C.json D.json ...] \
        [--launch A.json B.json ...] [--node NODE_A.json NODE_B.json ...] --out envcheck/compare/noise_floors.json

``--launch`` pairs are negative controls whose rows compared on launch time only (host-timed: JAX's,
which have no GPU time) go into the ``launch/...`` kinds, their implementations into ``launch_impls``:
rows a diff calls only with such a floor (compare/shipped.py). Their GPU-time rows are left out, so the
kernel floors stay as the positional pairs learned them (runs with repeats count as their first, as above).

``--node`` pairs are back-to-back node runs (``envcheck run --gpus all``) on one machine: only their
node rows (collectives, copies) go into the model's ``node/...`` kinds (``node_diff.floor_rows``), so
the per-GPU quick suites they also ran leave the kernel floors as the positional pairs learned them.

Regenerate it when new controls are committed (e.g. the runs of tools/evidence/controls.sh).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envcheck.analysis import analyse
from envcheck.compare import diff, node_diff, shipped
from envcheck.compare.node_diff import node_side
from envcheck.model import Report, Timing, load


def first_repeat(r: Report) -> Report:
    """A report of runs with repeats (``run --repeat``) cut to its first repeat: the floors are
    for reports without repeats, so they are learned from single runs."""

    def cut(t: Timing | None) -> Timing | None:
        if t is None or not t.passes:
            return t
        return Timing(t.method, list(t.samples_us)[:t.passes[0]], t.calls_per_sample)

    benches = tuple(dataclasses.replace(b, cases=tuple(dataclasses.replace(c, gpu=cut(c.gpu), launch=cut(c.launch))
                                                       for c in b.cases)) for b in r.benches)
    return dataclasses.replace(r, benches=benches)


class NotAControl(ValueError):
    """A pair that is not a negative control the floors may be learned from (the message says why)."""


Pair = tuple[str, str]


def _control(base: str, other: str) -> tuple[str, Report, Report, diff.Comparison]:
    ra, rb = load(base), load(other)
    model, model_b = ra.benches[0].device.name, rb.benches[0].device.name
    if model != model_b:
        raise NotAControl(f"{base} and {other} ran on different GPU models ({model}, {model_b}): not a control")
    # Judged without floors: what is learned never depends on the floors shipped before.
    cmp = diff.compare((Path(base).name, first_repeat(ra)), (Path(other).name, first_repeat(rb)), floors={})
    if cmp.env:
        raise NotAControl(f"{base} and {other} differ in {', '.join(e.key for e in cmp.env)}: not a control")
    if cmp.same_machine is not True:
        raise NotAControl(f"{base} and {other} did not run on one physical GPU: the shipped floors are for reruns on one")
    return model, ra, rb, cmp


def learn(pairs: Sequence[Pair], *, node: Sequence[Pair] = (), launch: Sequence[Pair] = ()) -> dict[str, Any]:
    """The noise-floor document (``shipped.parse`` reads it) learned from negative controls: ``pairs``
    (every compared row), ``launch`` (their launch-time rows only), ``node`` (their node rows only), each
    (baseline, other) report paths. NotAControl for a pair that is not one."""
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {}  # model -> kind -> (log ratio, within se)
    sources: dict[str, dict[str, list[dict[str, str]]]] = {}  # model -> "pairs" | "launch_pairs" | "node_pairs"
    impls: dict[str, dict[str, set[str]]] = {}  # model -> "impls" | "launch_impls" -> implementations

    def record(field: str, model: str, base: str, other: str, ra: Report, rb: Report) -> None:
        sources.setdefault(model, {}).setdefault(field, []).append(
            {"baseline": Path(base).name, "other": Path(other).name, "created": f"{ra.created} / {rb.created}"})

    for base, other in node:
        model, ra, rb, _ = _control(base, other)
        sa, sb = node_side(analyse(ra).node), node_side(analyse(rb).node)
        if sa is None or sb is None:
            raise NotAControl(f"{base} and {other}: --node pairs are node runs (envcheck run --gpus all)")
        record("node_pairs", model, base, other, ra, rb)
        for kinds, log_ratio, within in node_diff.floor_rows(sa, sb):
            for kind in kinds:
                rows.setdefault(model, {}).setdefault(shipped.kind_label(("node", *kind)), []).append(
                    (log_ratio, within))
    for field, group in (("pairs", pairs), ("launch_pairs", launch)):
        for base, other in group:
            model, ra, rb, cmp = _control(base, other)
            record(field, model, base, other, ra, rb)
            for c in cmp.compared:
                if c.ratio is None or c.within_log_se is None or (field == "launch_pairs" and c.timing != shipped.LAUNCH):
                    continue
                which = "launch_impls" if c.timing == shipped.LAUNCH else "impls"
                impls.setdefault(model, {}).setdefault(which, set()).add(c.impl)
                for kind in diff.case_kinds(c.timing, c.op, c.category):
                    rows.setdefault(model, {}).setdefault(shipped.kind_label(kind), []).append(
                        (math.log(c.ratio), c.within_log_se))
    models: dict[str, dict[str, Any]] = {}
    for model, kinds in sorted(rows.items()):
        floors = {}
        for label, xs in sorted(kinds.items()):
            f = shipped.kind_floor([x for x, _ in xs], [s for _, s in xs])
            floors[label] = {"log_sd": round(f.log_sd, 6), "rows": f.rows, "df": f.df}
        found, used = sources.get(model, {}), impls.get(model, {})
        models[model] = {"pairs": found.get("pairs", []), "impls": sorted(used.get("impls", ())), "kinds": floors}
        for field in ("node_pairs", "launch_pairs"):
            if field in found:
                models[model][field] = found[field]
        if "launch_impls" in used:
            models[model]["launch_impls"] = sorted(used["launch_impls"])
    return {"format": shipped.FORMAT, "version": shipped.VERSION, "generated_by": "tools/evidence/noise_floors.py",
            "method": "per kind: sqrt(max(0, mean(log ratio^2) - mean(within-run se^2))) over the rows of "
                      "back-to-back controls, used for the implementations listed; node/... kinds from the "
                      "node_pairs' node rows, launch/... kinds (rows timed on the host only) from the launch rows "
                      "of pairs and launch_pairs, for the launch_impls (compare/shipped.py)",
            "models": models}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("reports", nargs="*", metavar="REPORT.json", help="pairs: baseline, then the other run")
    p.add_argument("--node", nargs=2, action="append", default=[], metavar=("BASELINE.json", "OTHER.json"),
                   help="a pair of back-to-back node runs: only their node rows are learned from")
    p.add_argument("--launch", nargs=2, action="append", default=[], metavar=("BASELINE.json", "OTHER.json"),
                   help="a negative control: only its rows compared on launch time (host-timed) are learned from")
    p.add_argument("--out", metavar="FILE", help="write here once everything is computed (default: stdout)")
    args = p.parse_args(argv)
    if len(args.reports) % 2:
        p.error("reports come in pairs (baseline, other)")
    try:
        doc = learn(list(zip(args.reports[::2], args.reports[1::2], strict=True)),
                    node=[tuple(x) for x in args.node], launch=[tuple(x) for x in args.launch])
    except NotAControl as e:
        p.error(str(e))
    text = json.dumps(doc, indent=1) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
