"""The compact environment panel: a line per layer of the stack and per GPU; a missing fact shows its reason."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from envcheck.analysis.ceilings import theoretical_bandwidth_gbps
from envcheck.model import Environment, Gpu
from envcheck.render import fmt
from envcheck.render.escape import term
from envcheck.render.i18n import t
from envcheck.render.terminal.console import heading
from envcheck.render.view import fact_reason

REASON_CHARS = 70


def _reason(env: Environment, section: str, key: str) -> str:
    why = fact_reason(env.fact(section, key).reason)
    return term(why if len(why) <= REASON_CHARS else why[: REASON_CHARS - 1] + "…")


def _join(*parts: str | None) -> str:
    return ", ".join(p for p in parts if p)


def _if(value: object, show: Callable[[object], str] = term) -> str | None:
    """``value`` shown, or None where the fact is missing (empty, false, zero)."""
    return show(value) if value else None


def system_line(env: Environment) -> str:
    g = env.get
    where = f"WSL{term(g('wsl', 'wsl_version') or '')} ({term(g('wsl', 'distro_name') or '?')})" \
        if g("wsl", "is_wsl") else ""
    container = g("system", "container")
    if container and container != "none":
        where = _join(where, t("term.env.in", where=term(container)))
    return _join(_if(g("system", "os_name")) or _reason(env, "system", "os_name"),
                 _if(g("system", "kernel"), lambda k: t("term.env.kernel", kernel=term(k))), _if(g("system", "arch")),
                 where or None)


def cpu_line(env: Environment) -> str:
    g = env.get
    ram = g("system", "ram_total_bytes")
    return _join(_if(g("system", "cpu_model")),
                 _if(g("system", "cpu_cores_logical"), lambda n: t("term.env.cores", count=term(n))),
                 t("term.env.ram", size=fmt.nbytes(ram)) if isinstance(ram, (int, float)) else None)


def python_line(env: Environment) -> str:
    g = env.get
    kind, path = g("system", "python_env"), g("system", "python_env_path")
    where = f"{term(kind)} {term(path)}" if kind and path and kind != "system" else _if(kind)
    return _join(_if(g("system", "python_version")), where, _if(g("system", "python_executable")))


def driver_line(env: Environment) -> str:
    if err := env.get("driver", "nvml_error"):
        return t("term.env.nvml_error", error=term(err))
    if not (version := env.get("driver", "driver_version")):
        return _reason(env, "driver", "driver_version")
    return _join(term(version), _if(env.get("driver", "cuda_driver_version"),
                                    lambda v: t("term.env.runs_cuda", version=term(v))))


def cuda_line(env: Environment) -> str:
    g = env.get
    return _join(_if(g("cuda", "nvcc_version"), lambda v: f"nvcc {term(v)}")
                 or t("term.env.no_nvcc", reason=_reason(env, "cuda", "nvcc_path")),
                 _if(g("cuda", "toolkit_path"), lambda p: t("term.env.toolkit", path=term(p))),
                 _if(g("cuda", "libcuda_path"), lambda p: f"libcuda {term(p)}") or t("term.env.no_libcuda"))


def _took(key: str, seconds: object) -> str | None:
    return t(key, time=fmt.seconds(seconds)) if isinstance(seconds, (int, float)) else None


def torch_line(env: Environment) -> str:
    g = env.get
    if not g("torch", "installed"):
        return _reason(env, "torch", "version")
    meta = _join(term(g("torch", "version")), _if(g("torch", "build"), lambda b: t("term.env.build", build=term(b))),
                 _if(g("torch", "cuda_version"), lambda v: f"CUDA {term(v)}"))
    if g("torch_runtime", "import_ok") is None:
        return meta
    if not g("torch_runtime", "import_ok"):
        return _join(meta, f"[bold red]{t('term.env.import_failed')}[/]")
    tf32 = g("torch_runtime", "tf32_matmul")
    return _join(
        meta,
        t("term.env.devices", count=term(g("torch_runtime", "device_count"))) if g("torch_runtime", "cuda_available")
        else t("term.env.no_cuda"),
        _if(g("torch_runtime", "cudnn_version"), lambda v: f"cuDNN {term(v)}"),
        (t("term.env.tf32_on") if tf32 else t("term.env.tf32_off")) if tf32 is not None else None,
        _took("term.env.import", g("torch_runtime", "import_s")),
    )


def triton_line(env: Environment) -> str:
    g = env.get
    if not g("triton", "installed"):
        return _reason(env, "triton", "version")
    max_sm = _if(g("triton", "ptxas_max_sm"), lambda sm: f" ({t('term.env.up_to_sm', sm=term(sm))})")
    meta = _join(term(g("triton", "version")), _if(g("triton", "ptxas_version"),
                                                   lambda v: f"ptxas {term(v)}{max_sm or ''}"))
    ok = g("triton_runtime", "smoke_ok")
    if ok is None:
        return meta
    smoke = t("term.env.smoke_ok") if ok else f"[bold red]{t('term.env.smoke_failed')}[/]"
    return _join(meta, smoke, _took("term.env.compile", g("triton_runtime", "compile_s")))


def gpu_line(gpu: Gpu) -> str:
    """``NVIDIA H200, 140 GiB, cc 9.0, 132 SMs, SM 1980/1980 MHz, 4814 GB/s, 36 °C, 126/700 W, P0``."""
    if gpu.lost:
        return f"[bold red]{t('term.env.lost', reason=term(gpu.lost))}[/]"
    g = gpu.get
    clock, clock_max = g("sm_clock_mhz"), g("sm_clock_max_mhz")
    power, limit = g("power_w"), g("power_limit_w")
    bw = theoretical_bandwidth_gbps(g("mem_clock_max_mhz"), g("memory_bus_width_bits"))
    used, total = g("memory_used_bytes"), g("memory_total_bytes")
    memory = fmt.nbytes(total) if isinstance(total, (int, float)) else None
    if memory and isinstance(used, int) and used > 2**30:
        memory += " " + t("term.env.used", size=fmt.nbytes(used))
    return _join(
        _if(g("name")) or t("term.env.unknown_gpu"), memory,
        _if(g("compute_capability"), lambda cc: t("term.env.cc", cc=term(cc))),
        _if(g("sm_count"), lambda n: t("term.env.sms", count=term(n))),
        f"SM {term(clock)}/{term(clock_max)} MHz" if clock is not None and clock_max is not None else None,
        f"{fmt.num(bw, 4)} GB/s" if isinstance(bw, (int, float)) else None,
        f"{term(g('temperature_c'))} °C" if g("temperature_c") is not None else None,
        f"{power:.0f}/{limit:.0f} W" if isinstance(power, (int, float)) and isinstance(limit, (int, float)) else None,
        _if(g("pstate")))


def environment_lines(env: Environment) -> list[tuple[str, str]]:
    """(layer, facts) pairs, top of the stack down, then one per GPU; the facts are markup."""
    rows = [(t("term.env.system"), system_line(env)), ("CPU", cpu_line(env)), ("Python", python_line(env)),
            (t("term.env.driver"), driver_line(env)), ("CUDA", cuda_line(env)), ("PyTorch", torch_line(env)),
            ("Triton", triton_line(env))]
    packages = env.get("platform", "python_packages")
    if isinstance(packages, list) and packages:
        rows.append((t("term.env.packages"), ", ".join(
            term(fmt.fact_value("python_packages", p, t)) for p in packages if isinstance(p, dict))))
    rows += [(f"GPU {gpu.index}", gpu_line(gpu)) for gpu in env.gpus]
    if not env.gpus:
        rows.append((t("term.env.gpus"), t("term.env.no_gpus")))
    return rows


def print_environment(console: Console, env: Environment, replayed: bool = False) -> None:
    """``replayed``: the facts come from a snapshot, so the time is the replay's, not a probe of this machine."""
    key = "term.env.replayed" if replayed else "term.env.probed"
    took = t(key, seconds=f"{env.probe_s:.2f}") if env.probe_s is not None else ""
    heading(console, t("section.environment") + took)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(overflow="fold")  # a long line continues under its value, not under the label
    for name, value in environment_lines(env):
        grid.add_row(name, value)
    console.print(grid)
