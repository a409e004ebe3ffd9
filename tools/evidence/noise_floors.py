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
        [--node NODE_A.json NODE_B.json ...] --out envcheck/compare/noise_floors.json

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
from pathlib import Path

from envcheck.analysis import analyse
from envcheck.compare import diff, node_diff, shipped
from envcheck.compare.node_read import node_side
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("reports", nargs="*", metavar="REPORT.json", help="pairs: baseline, then the other run")
    p.add_argument("--node", nargs=2, action="append", default=[], metavar=("BASELINE.json", "OTHER.json"),
                   help="a pair of back-to-back node runs: only their node rows are learned from")
    p.add_argument("--out", metavar="FILE", help="write here once everything is computed (default: stdout)")
    args = p.parse_args(argv)
    if len(args.reports) % 2:
        p.error("reports come in pairs (baseline, other)")
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {}  # model -> kind -> (log ratio, within se)
    pairs: dict[str, list[dict[str, str]]] = {}
    node_pairs: dict[str, list[dict[str, str]]] = {}
    impls: dict[str, set[str]] = {}  # model -> the implementations its floors are for

    def control(base: str, other: str) -> tuple[str, Report, Report, diff.Comparison]:
        ra, rb = load(base), load(other)
        model, model_b = ra.benches[0].device.name, rb.benches[0].device.name
        if model != model_b:
            p.error(f"{base} and {other} ran on different GPU models ({model}, {model_b}): not a control")
        cmp = diff.compare((Path(base).name, first_repeat(ra)), (Path(other).name, first_repeat(rb)))
        if cmp.env:
            p.error(f"{base} and {other} differ in {', '.join(e.key for e in cmp.env)}: not a control")
        if cmp.same_machine is not True:
            p.error(f"{base} and {other} did not run on one physical GPU: the shipped floors are for reruns on one")
        return model, ra, rb, cmp

    for base, other in args.node:
        model, ra, rb, _ = control(base, other)
        sa, sb = node_side(analyse(ra).node), node_side(analyse(rb).node)
        if sa is None or sb is None:
            p.error(f"{base} and {other}: --node pairs are node runs (envcheck run --gpus all)")
        node_pairs.setdefault(model, []).append({"baseline": Path(base).name, "other": Path(other).name,
                                                 "created": f"{ra.created} / {rb.created}"})
        for kinds, log_ratio, within in node_diff.floor_rows(sa, sb):
            for kind in kinds:
                rows.setdefault(model, {}).setdefault(shipped.kind_label(("node", *kind)), []).append(
                    (log_ratio, within))
    for base, other in zip(args.reports[::2], args.reports[1::2], strict=True):
        model, ra, rb, cmp = control(base, other)
        pairs.setdefault(model, []).append({"baseline": Path(base).name, "other": Path(other).name,
                                            "created": f"{ra.created} / {rb.created}"})
        for c in cmp.compared:
            if c.ratio is None or c.within_log_se is None:
                continue
            impls.setdefault(model, set()).add(c.impl)
            for kind in diff.case_kinds(c.timing, c.op, c.category):
                rows.setdefault(model, {}).setdefault(shipped.kind_label(kind), []).append(
                    (math.log(c.ratio), c.within_log_se))
    models = {}
    for model, kinds in sorted(rows.items()):
        floors = {}
        for label, xs in sorted(kinds.items()):
            f = shipped.kind_floor([x for x, _ in xs], [s for _, s in xs])
            floors[label] = {"log_sd": round(f.log_sd, 6), "rows": f.rows, "df": f.df}
        models[model] = {"pairs": pairs.get(model, []), "impls": sorted(impls.get(model, ())), "kinds": floors}
        if model in node_pairs:
            models[model]["node_pairs"] = node_pairs[model]
    doc = {"format": shipped.FORMAT, "version": shipped.VERSION, "generated_by": "tools/evidence/noise_floors.py",
           "method": "per kind: sqrt(max(0, mean(log ratio^2) - mean(within-run se^2))) over the rows of "
                     "back-to-back controls, used for the implementations listed; node/... kinds from the "
                     "node_pairs' node rows (compare/shipped.py)",
           "models": models}
    text = json.dumps(doc, indent=1) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
