"""What differs between two environments and two sets of health checks: only facts that explain a performance or
health change, each with the ``key`` of its fact (``driver.driver_version``, ``gpu.uuid``, ``setting.quick``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from envcheck import units
from envcheck.model import Check, Environment, Fact, Report
from envcheck.ops import IMPLS

Formatter = Callable[[object], str]


def _plain(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _unit(unit: str) -> Formatter:
    def fmt(v: object) -> str:
        return f"{_plain(v)} {unit}" if isinstance(v, (int, float)) and not isinstance(v, bool) else _plain(v)

    return fmt


# (area, section, key, label, formatter). ``area`` groups rows and names the change in history
# ("driver 575.57 -> 580.159"); ``label`` is what a reader sees.
SECTION_FIELDS: tuple[tuple[str, str, str, str, Formatter], ...] = (
    ("os", "system", "os_name", "OS", _plain),
    ("kernel", "system", "kernel", "kernel", _plain),
    ("os", "system", "arch", "architecture", _plain),
    ("cpu", "system", "cpu_model", "CPU", _plain),
    ("python", "system", "python_version", "Python", _plain),
    ("os", "system", "container", "container", _plain),
    ("wsl", "wsl", "is_wsl", "WSL", _plain),
    ("wsl", "wsl", "wsl_version", "WSL version", _plain),
    ("driver", "driver", "driver_version", "driver", _plain),
    ("driver", "driver", "cuda_driver_version", "driver's CUDA", _plain),
    ("driver", "driver", "gpu_count", "GPU count", _plain),
    ("cuda", "cuda", "nvcc_version", "CUDA toolkit (nvcc)", _plain),
    ("torch", "torch", "version", "PyTorch", _plain),
    ("torch", "torch", "cuda_version", "PyTorch's CUDA", _plain),
    ("triton", "triton", "version", "Triton", _plain),
    ("triton", "triton", "ptxas_version", "ptxas used by Triton", _plain),
    ("torch", "torch_runtime", "cudnn_version", "cuDNN", _plain),
    ("torch", "torch_runtime", "tf32_matmul", "TF32 matmul (torch)", _plain),
    ("torch", "torch_runtime", "float32_matmul_precision", "float32 matmul precision", _plain),
)

GPU_FIELDS: tuple[tuple[str, str, str, Formatter], ...] = (
    ("gpu", "name", "model", _plain),
    # Another physical GPU of the same model: the commonest hidden difference between two cloud runs.
    ("gpu", "uuid", "UUID", _plain),
    ("gpu", "serial", "serial number", _plain),
    ("gpu", "memory_total_bytes", "memory", lambda v: units.gib(v) or str(v)),
    ("gpu", "compute_capability", "compute capability", _plain),
    ("gpu", "sm_count", "SM count", _plain),
    ("gpu", "sm_clock_max_mhz", "max SM clock", _unit("MHz")),
    ("gpu", "mem_clock_max_mhz", "max memory clock", _unit("MHz")),
    ("gpu", "memory_bus_width_bits", "memory bus width", _unit("bit")),
    ("gpu", "power_limit_w", "power limit", _unit("W")),
    ("gpu", "ecc_mode_current", "ECC", _plain),
    ("gpu", "mig_mode", "MIG", _plain),
    ("gpu", "persistence_mode", "persistence mode", _plain),
    ("gpu", "pcie_gen_max", "max PCIe generation", _plain),
    ("gpu", "pcie_width_max", "max PCIe width", _plain),
    ("gpu", "vbios_version", "VBIOS", _plain),
)


@dataclass(frozen=True)
class EnvChange:
    """One fact that differs. ``before``/``after`` are display text (a value, or "— (reason)")."""

    area: str  # os, kernel, driver, cuda, torch, triton, python, gpu, envcheck, ...
    label: str
    before: str
    after: str
    gpu: int | None = None  # GPU index for GPU facts
    key: str = ""  # the fact: "<section>.<key>", "gpu.<key>", "bench.<name>", "envcheck.version", "setting.<name>"

    @property
    def title(self) -> str:
        return f"GPU {self.gpu} {self.label}" if self.gpu is not None else self.label


def _show(f: Fact, fmt: Formatter) -> str:
    return fmt(f.value) if f.ok else f"— ({f.reason})" if f.reason else "—"


def _differ(a: Fact, b: Fact) -> bool:
    """Whether two facts differ in a way worth showing (two missing facts never do)."""
    return (a.ok or b.ok) and bool(a.value != b.value)


def env_changes(a: Environment, b: Environment) -> list[EnvChange]:
    """Differences from environment ``a`` (baseline) to ``b``, sections first, then GPUs by index."""
    out: list[EnvChange] = []
    for area, section, key, label, fmt in SECTION_FIELDS:
        # A key one report does not hold at all (an older or partial report) is unknown, not changed.
        if key not in a.sections.get(section, {}) or key not in b.sections.get(section, {}):
            continue
        fa, fb = a.fact(section, key), b.fact(section, key)
        if _differ(fa, fb):
            out.append(EnvChange(area, label, _show(fa, fmt), _show(fb, fmt), key=f"{section}.{key}"))
    gpus_a = {g.index: g for g in a.gpus}
    gpus_b = {g.index: g for g in b.gpus}
    for idx in sorted(set(gpus_a) | set(gpus_b)):
        ga, gb = gpus_a.get(idx), gpus_b.get(idx)
        if ga is None or gb is None:
            present = ga or gb
            name = present.get("name") if present else None
            what = str(name or "a GPU")
            out.append(EnvChange("gpu", "present", what if ga else "—", what if gb else "—", idx, key="gpu.present"))
            continue
        if ga.lost or gb.lost:
            if (ga.lost or "") != (gb.lost or ""):
                out.append(EnvChange("gpu", "state", f"lost: {ga.lost}" if ga.lost else "ok",
                                     f"lost: {gb.lost}" if gb.lost else "ok", idx, key="gpu.lost"))
            continue
        for area, key, label, fmt in GPU_FIELDS:
            got_a, got_b = ga.facts.get(key), gb.facts.get(key)
            if got_a is None or got_b is None:
                continue
            if _differ(got_a, got_b):
                out.append(EnvChange(area, label, _show(got_a, fmt), _show(got_b, fmt), idx, key=f"gpu.{key}"))
    return out


_RANK = {"pass": 0, "skip": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True)
class CheckChange:
    """A health check whose verdict differs (``kind``): ``new_fail``, ``worse``, ``fixed``, ``better``, ``removed``,
    or ``different`` (two machines: nothing was fixed or broken, they differ)."""

    id: str
    title: str
    kind: str
    before: str | None  # status, None when the check did not run
    after: str | None
    finding: str  # the newer finding (the older one when the check was removed)
    fix: str | None
    said: Check | None = None  # the check whose finding this is, with its keys: the renderers phrase it


CHECK_ORDER = {"new_fail": 0, "worse": 1, "different": 2, "fixed": 3, "better": 4, "removed": 5}


def check_changes(a: tuple[Check, ...], b: tuple[Check, ...], same_machine: bool | None = True) -> list[CheckChange]:
    """Verdict changes from checks ``a`` to ``b``, newly failing first (two machines: ``different``)."""
    ca = {c.id: c for c in a}
    cb = {c.id: c for c in b}
    out: list[CheckChange] = []
    for cid in list(ca) + [k for k in cb if k not in ca]:
        x, y = ca.get(cid), cb.get(cid)
        if x and y and x.status == y.status:
            continue
        # A check on one side only matters when it is not passing.
        if y is None:
            if x is None or _RANK[x.status] == 0:
                continue
            kind = "removed"
        elif y.status == "fail":
            kind = "new_fail"
        elif x is None:
            if _RANK[y.status] == 0:
                continue
            kind = "worse"
        elif _RANK[y.status] > _RANK[x.status]:
            kind = "worse"
        elif _RANK[y.status] < _RANK[x.status]:
            kind = "fixed" if _RANK[y.status] == 0 else "better"
        else:
            continue  # pass <-> skip: not a health change
        if same_machine is False:
            kind = "different"
        ref = y or x
        assert ref is not None
        out.append(CheckChange(cid, ref.title, kind, x.status if x else None, y.status if y else None,
                               ref.finding, y.fix if y else None, ref))
    out.sort(key=lambda c: CHECK_ORDER[c.kind])
    return out


STORY_AREAS = frozenset({"driver", "cuda", "torch", "triton", "kernel", "gpu", "os", "python"})

# The built-in implementations a change of one package can move: Triton runs envcheck's Triton kernels and what
# torch.compile generates. A change anywhere else can move any row, and any change a user's implementation.
MOVES_ONLY = {"triton": frozenset({"triton", "compile"})}


def can_move(change: EnvChange, impl: str) -> bool:
    """Whether ``change`` can explain a change in ``impl``'s times: a Triton install never explains a PyTorch row."""
    only = MOVES_ONLY.get(change.area)
    return only is None or impl in only or impl not in IMPLS


def report_env_changes(a: Report, b: Report) -> list[EnvChange]:
    """``env_changes`` plus what the benchmarks recorded: their versions and GPU UUID where the probes show no
    change, envcheck's own version and the run settings (they move numbers as much as a driver update)."""
    out = env_changes(a.environment, b.environment)
    shown = {c.key for c in out}
    ba, bb = a.bench, b.bench
    va = ba.versions if ba else {}
    vb = bb.versions if bb else {}
    for name, label in (("torch", "PyTorch"), ("triton", "Triton")):
        if f"{name}.version" not in shown and va.get(name) and vb.get(name) and va[name] != vb[name]:
            out.append(EnvChange(name, f"{label} (benchmark)", va[name], vb[name], key=f"bench.{name}"))
    if ba and bb and "gpu.uuid" not in shown:
        ua, ub = ba.device.uuid, bb.device.uuid
        if ua and ub and ua != ub:
            out.append(EnvChange("gpu", "UUID (benchmark)", ua, ub, ba.device.index, key="bench.uuid"))
    if a.tool_version != b.tool_version:
        out.append(EnvChange("envcheck", "envcheck version", a.tool_version, b.tool_version, key="envcheck.version"))
    if ba and bb:
        for f in dataclasses.fields(ba.settings):
            x, y = getattr(ba.settings, f.name), getattr(bb.settings, f.name)
            if f.name not in UNSHOWN_SETTINGS and x != y:
                out.append(EnvChange("envcheck", f"run setting {f.name}", _setting(x), _setting(y),
                                     key=f"setting.{f.name}"))
    return out


# Settings that only list what was run (shown by the cases themselves).
UNSHOWN_SETTINGS = frozenset({"ops", "impls"})


def _setting(value: object) -> str:
    return "—" if value is None else ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
