"""Noise floors shipped with envcheck: how far a row moves between two runs where nothing changed.

Two reports without repeats cannot show their own run-to-run noise, and estimating it from
the very two runs being judged lets a real change hide in its own allowance (or a quiet pair
of runs make every wobble significant). So for each GPU model envcheck has committed
back-to-back controls of (two independent runs, nothing changed), ``tools/evidence/noise_floors.py``
learns one floor per kind of case and writes ``noise_floors.json`` beside this module, with
the reports it came from. A diff of two reports without repeats on that GPU model uses the
floor of each row's kind, and says so.

The floor of a kind is the standard deviation of a single row's log time ratio between two
runs, beyond the within-run noise of the two medians: ``sqrt(max(0, mean(log ratio^2) -
mean(within^2)))`` over the kind's rows: the spread around *no change* (a kind that moved as a
whole between the runs is noise too). A mean square, not a robust scale: run-to-run noise is
heavy-tailed (on the H200 pair of 2026-11-22 most rows move by 0.1% and a few Triton fp32 matmuls
by 3-6%), and a robust scale that ignores the tail left 28 of 247 intervals excluding 1 there,
against 11 with the mean square (both in-sample). Kinds are the diff's (``diff.case_kinds``): op
and size category, op, size category, every row (most specific first), each of the rows compared on
one timing (GPU or launch time); one needs ``stats.MIN_FLOOR_CASES`` rows.
A floor is used only for the implementations its controls measured (``impls``): the kinds do
not name the implementation, and a floor learned from torch, Triton and torch.compile says
nothing of another implementation's run-to-run noise; such a row gets the pair's own estimate.
Its degrees of freedom are its rows, over every control pair of the model. A pair judged with
floors learned from it is in-sample; the controls with repeats and the earlier pairs (README) are
the test.

Rows compared on launch time (timed on the host's side of a call, with no GPU time: JAX's rows,
whose launches a CUDA graph cannot capture) get floors of their own kinds (``launch/...``), learned
from the launch-time rows of committed negative controls (``launch_pairs``) and used only for the
implementations those rows measured (``launch_impls``): a host-timed row moves with the host (JAX's
rows by 0.61-1.50x between two H100 runs where nothing changed), which neither the GPU-time rows'
floors nor a run's own repeats (they share what moves a whole run) cover. A diff calls such a row
only with one of these floors; without, it shows its ratio as not judged (``diff.py``).

Node rows (collectives and copies of ``envcheck run --gpus all``) get floors of their own, kinds
prefixed ``node`` (``node/node/all_gather/large/67108864``, ``node/node/all_gather/large``, ``node/copy/peer``:
``node_diff``'s kinds, a collective's size the most specific), learned
the same way from committed back-to-back node runs on one machine (``node_pairs``), for any number
of ranks. Without them a node diff measures its floor over its own rows, which let one pair of
runs where nothing changed call a collective that moved 4-10% between them (all_to_all 16 MiB,
reduce_scatter 4 GiB) slower or faster in every committed node control.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from envcheck.compare import stats
from envcheck.outside_json import Json

FORMAT = "envcheck-noise-floors"
VERSION = 2
DATA_FILE = "noise_floors.json"
LAUNCH = "launch"  # the timing of the rows timed on the host's side of a call (diff.case_kinds)


@dataclass(frozen=True)
class KindFloor:
    """The floor of one kind of case on one GPU model: a log-scale standard deviation, from
    ``rows`` rows with ``df`` degrees of freedom."""

    log_sd: float
    rows: int
    df: int


@dataclass(frozen=True)
class ModelFloors:
    """The floors of one GPU model and where they came from (``pairs``: the committed report
    file names of each control pair, baseline first; ``impls``: the implementations their rows
    measured)."""

    model: str
    pairs: tuple[tuple[str, str], ...]
    kinds: Mapping[str, KindFloor]
    impls: frozenset[str]
    node_pairs: tuple[tuple[str, str], ...] = ()  # the node controls the ``node/...`` kinds came from
    launch_pairs: tuple[tuple[str, str], ...] = ()  # controls only the ``launch/...`` kinds came from
    launch_impls: frozenset[str] = frozenset()  # the implementations the ``launch/...`` kinds are for

    def node_floor(self, kinds: Sequence[tuple[str, ...]]) -> stats.NoiseFloor | None:
        """The floor of the most specific of a node row's ``kinds`` (``node_diff``'s) that has one."""
        return self._first(tuple(("node", *k) for k in kinds))

    def _first(self, kinds: Sequence[tuple[str, ...]]) -> stats.NoiseFloor | None:
        for k in kinds:
            f = self.kinds.get(kind_label(k))
            if f is not None and f.rows >= stats.MIN_FLOOR_CASES:
                # Taken as shared by every case of the kind: the geometric means then never count
                # a kind's cases as independent (stats.geomean).
                return stats.NoiseFloor(f.log_sd, "shipped", k, f.rows, f.df, 0.0, f.log_sd, 0)
        return None

    def floor(self, kinds: Sequence[tuple[str, ...]], impl: str) -> stats.NoiseFloor | None:
        """The floor of the most specific of ``kinds`` that has one (None when none has, or when
        the controls never measured ``impl`` on the kinds' timing: ``launch_impls`` for launch time)."""
        timing = kinds[0][0] if kinds and kinds[0] else ""
        if impl not in (self.launch_impls if timing == LAUNCH else self.impls):
            return None
        return self._first(kinds)


def kind_label(kind: tuple[str, ...]) -> str:
    """A kind as stored: "gpu/matmul/large", "gpu/matmul", "gpu/large", "gpu" (every row of its timing)."""
    return "/".join(kind)


def kind_floor(log_ratios: Sequence[float], within_se: Sequence[float]) -> KindFloor:
    """The floor of one kind from the rows of one control pair (module docstring)."""
    lr = [x for x, s in zip(log_ratios, within_se, strict=True) if math.isfinite(s)]
    se = [s for s in within_se if math.isfinite(s)]
    if not lr:
        raise ValueError("a floor needs rows with an interval")
    spread2 = math.fsum(x * x for x in lr) / len(lr)
    within2 = math.fsum(s * s for s in se) / len(se)
    return KindFloor(math.sqrt(max(0.0, spread2 - within2)), len(lr), len(lr))


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def parse(data: Json) -> dict[str, ModelFloors]:
    """The floors of every model from the data file's JSON (ValueError when it is not one)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        raise ValueError(f"not an {FORMAT} file of version {VERSION}")
    out = {}
    for model, m in data["models"].items():
        kinds = {k: KindFloor(float(v["log_sd"]), int(v["rows"]), int(v["df"])) for k, v in m["kinds"].items()}
        out[model] = ModelFloors(model, tuple((p["baseline"], p["other"]) for p in m["pairs"]), kinds,
                                 frozenset(str(i) for i in m["impls"]),
                                 tuple((p["baseline"], p["other"]) for p in m.get("node_pairs", ())),
                                 tuple((p["baseline"], p["other"]) for p in m.get("launch_pairs", ())),
                                 frozenset(str(i) for i in m.get("launch_impls", ())))
    return out


@functools.lru_cache(maxsize=1)
def shipped() -> dict[str, ModelFloors]:
    """The floors shipped in the package, by GPU model name (as NVML names it)."""
    text = resources.files("envcheck.compare").joinpath(DATA_FILE).read_text(encoding="utf-8")
    return parse(json.loads(text))


def for_model(name: str | None) -> ModelFloors | None:
    """The shipped floors of one GPU model, or None when none were learned for it."""
    return shipped().get(name) if name else None
