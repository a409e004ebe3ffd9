"""Noise floors shipped with envcheck: how far a row moves between two runs where nothing changed, per GPU model
and kind of case, learned from committed controls (docs/compare.md) as ``sqrt(max(0, mean(log ratio^2) -
mean(within^2)))``. It holds only for reruns on one physical GPU and the implementations its controls measured.
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
    """The floor of one kind of case on one GPU model: a log-scale standard deviation over ``rows`` rows."""

    log_sd: float
    rows: int
    df: int


@dataclass(frozen=True)
class ModelFloors:
    """The floors of one GPU model and the committed control pairs (baseline first) they came from."""

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
                return stats.NoiseFloor(f.log_sd, "shipped", k, f.rows, f.df)
        return None

    def floor(self, kinds: Sequence[tuple[str, ...]], impl: str) -> stats.NoiseFloor | None:
        """The floor of the most specific of ``kinds`` that has one for ``impl``; None without one."""
        timing = kinds[0][0] if kinds and kinds[0] else ""
        if impl not in (self.launch_impls if timing == LAUNCH else self.impls):
            return None
        return self._first(kinds)


def kind_label(kind: tuple[str, ...]) -> str:
    """A kind as stored: "gpu/matmul/large", "gpu/matmul", "gpu/large", "gpu"."""
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
