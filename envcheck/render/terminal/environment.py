"""The compact environment panel: a line per layer of the stack and per GPU; a missing fact shows its reason.
"""

from __future__ import annotations

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


def _v(x: object) -> str:
    return term(x)


def system_line(env: Environment) -> str:
    g = env.get
    os_name = _v(g("system", "os_name")) if g("system", "os_name") else _reason(env, "system", "os_name")
    where = ""
    if g("wsl", "is_wsl"):
        where = f"WSL{_v(g('wsl', 'wsl_version') or '')} ({_v(g('wsl', 'distro_name') or '?')})"
    container = g("system", "container")
    if container and container != "none":
        where = _join(where, t("term.env.in", where=_v(container)))
    kernel = g("system", "kernel")
    return _join(os_name, t("term.env.kernel", kernel=_v(kernel)) if kernel else None,
                 _v(g("system", "arch")) if g("system", "arch") else None, where or None)


def cpu_line(env: Environment) -> str:
    g = env.get
    cores = g("system", "cpu_cores_logical")
    ram = g("system", "ram_total_bytes")
    return _join(_v(g("system", "cpu_model")) if g("system", "cpu_model") else None,
                 t("term.env.cores", count=_v(cores)) if cores else None,
                 t("term.env.ram", size=fmt.nbytes(ram)) if isinstance(ram, (int, float)) else None)


def python_line(env: Environment) -> str:
    g = env.get
    kind, path = g("system", "python_env"), g("system", "python_env_path")
    where = f"{_v(kind)} {_v(path)}" if kind and path and kind != "system" else (_v(kind) if kind else None)
    return _join(_v(g("system", "python_version")) if g("system", "python_version") else None, where,
                 _v(g("system", "python_executable")) if g("system", "python_executable") else None)


def driver_line(env: Environment) -> str:
    err = env.get("driver", "nvml_error")
    if err:
        return t("term.env.nvml_error", error=_v(err))
    version = env.get("driver", "driver_version")
    if not version:
        return _reason(env, "driver", "driver_version")
    cuda = env.get("driver", "cuda_driver_version")
    return _join(_v(version), t("term.env.runs_cuda", version=_v(cuda)) if cuda else None)


def cuda_line(env: Environment) -> str:
    g = env.get
    nvcc = g("cuda", "nvcc_version")
    return _join(
        f"nvcc {_v(nvcc)}" if nvcc else t("term.env.no_nvcc", reason=_reason(env, "cuda", "nvcc_path")),
        t("term.env.toolkit", path=_v(g("cuda", "toolkit_path"))) if g("cuda", "toolkit_path") else None,
        f"libcuda {_v(g('cuda', 'libcuda_path'))}" if g("cuda", "libcuda_path") else t("term.env.no_libcuda"),
    )


def torch_line(env: Environment) -> str:
    g = env.get
    if not g("torch", "installed"):
        return _reason(env, "torch", "version")
    cuda = g("torch", "cuda_version")
    meta = _join(_v(g("torch", "version")), t("term.env.build", build=_v(g("torch", "build"))) if g("torch", "build")
                 else None, f"CUDA {_v(cuda)}" if cuda else None)
    if g("torch_runtime", "import_ok") is None:
        return meta
    if not g("torch_runtime", "import_ok"):
        return _join(meta, f"[bold red]{t('term.env.import_failed')}[/]")
    avail = g("torch_runtime", "cuda_available")
    cudnn = g("torch_runtime", "cudnn_version")
    tf32 = g("torch_runtime", "tf32_matmul")
    import_s = g("torch_runtime", "import_s")
    return _join(
        meta,
        t("term.env.devices", count=_v(g("torch_runtime", "device_count"))) if avail else t("term.env.no_cuda"),
        f"cuDNN {_v(cudnn)}" if cudnn else None,
        (t("term.env.tf32_on") if tf32 else t("term.env.tf32_off")) if tf32 is not None else None,
        t("term.env.import", time=fmt.seconds(import_s)) if isinstance(import_s, (int, float)) else None,
    )


def triton_line(env: Environment) -> str:
    g = env.get
    if not g("triton", "installed"):
        return _reason(env, "triton", "version")
    ptxas = g("triton", "ptxas_version")
    max_sm = g("triton", "ptxas_max_sm")
    meta = _join(_v(g("triton", "version")),
                 (f"ptxas {_v(ptxas)}" + (f" ({t('term.env.up_to_sm', sm=_v(max_sm))})" if max_sm else ""))
                 if ptxas else None)
    ok = g("triton_runtime", "smoke_ok")
    if ok is None:
        return meta
    compile_s = g("triton_runtime", "compile_s")
    smoke = t("term.env.smoke_ok") if ok else f"[bold red]{t('term.env.smoke_failed')}[/]"
    return _join(meta, smoke,
                 t("term.env.compile", time=fmt.seconds(compile_s)) if isinstance(compile_s, (int, float)) else None)


def gpu_line(gpu: Gpu) -> str:
    """``NVIDIA H200, 140 GiB, cc 9.0, 132 SMs, SM 1980/1980 MHz, 4814 GB/s, 36 °C, 126/700 W, P0``."""
    if gpu.lost:
        return f"[bold red]{t('term.env.lost', reason=_v(gpu.lost))}[/]"
    g = gpu.get
    clock, clock_max = g("sm_clock_mhz"), g("sm_clock_max_mhz")
    power, limit = g("power_w"), g("power_limit_w")
    bw = theoretical_bandwidth_gbps(g("mem_clock_max_mhz"), g("memory_bus_width_bits"))
    used = g("memory_used_bytes")
    total = g("memory_total_bytes")
    memory = None
    if isinstance(total, (int, float)):
        memory = fmt.nbytes(total)
        if isinstance(used, int) and used > 2**30:
            memory += " " + t("term.env.used", size=fmt.nbytes(used))
    return _join(
        _v(g("name")) if g("name") else t("term.env.unknown_gpu"),
        memory,
        t("term.env.cc", cc=_v(g("compute_capability"))) if g("compute_capability") else None,
        t("term.env.sms", count=_v(g("sm_count"))) if g("sm_count") else None,
        f"SM {_v(clock)}/{_v(clock_max)} MHz" if clock is not None and clock_max is not None else None,
        f"{fmt.num(bw, 4)} GB/s" if isinstance(bw, (int, float)) else None,
        f"{_v(g('temperature_c'))} °C" if g("temperature_c") is not None else None,
        f"{power:.0f}/{limit:.0f} W" if isinstance(power, (int, float)) and isinstance(limit, (int, float)) else None,
        _v(g("pstate")) if g("pstate") else None,
    )


def environment_lines(env: Environment) -> list[tuple[str, str]]:
    """(layer, facts) pairs, top of the stack down, then one per GPU; the facts are markup."""
    rows = [
        (t("term.env.system"), system_line(env)),
        ("CPU", cpu_line(env)),
        ("Python", python_line(env)),
        (t("term.env.driver"), driver_line(env)),
        ("CUDA", cuda_line(env)),
        ("PyTorch", torch_line(env)),
        ("Triton", triton_line(env)),
    ]
    packages = env.get("platform", "python_packages")
    if isinstance(packages, list) and packages:
        rows.append((t("term.env.packages"), ", ".join(
            _v(fmt.fact_value("python_packages", p, t)) for p in packages if isinstance(p, dict))))
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
