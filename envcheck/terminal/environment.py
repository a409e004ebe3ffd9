"""The compact environment panel: one line per layer of the stack, one line per GPU.

Every value comes from the machine, so it goes into ``Text`` (never markup). A missing
fact shows its reason, shortened, instead of a blank.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.text import Text

from envcheck.model import Environment, Gpu
from envcheck.units import gib

REASON_CHARS = 70


def _reason(env: Environment, section: str, key: str) -> str:
    why = env.fact(section, key).reason or "unknown"
    return why if len(why) <= REASON_CHARS else why[: REASON_CHARS - 3] + "..."


def _join(*parts: str | None) -> str:
    return ", ".join(p for p in parts if p)


def system_line(env: Environment) -> str:
    g = env.get
    os_name = g("system", "os_name") or _reason(env, "system", "os_name")
    where = ""
    if g("wsl", "is_wsl"):
        where = f"WSL{g('wsl', 'wsl_version') or ''} ({g('wsl', 'distro_name') or '?'})"
    container = g("system", "container")
    if container and container != "none":
        where = _join(where, f"in {container}")
    kernel = g("system", "kernel")
    return _join(str(os_name), f"kernel {kernel}" if kernel else None, g("system", "arch"), where or None)


def cpu_line(env: Environment) -> str:
    g = env.get
    cores = g("system", "cpu_cores_logical")
    ram = gib(g("system", "ram_total_bytes"))
    return _join(g("system", "cpu_model"), f"{cores} logical cores" if cores else None, f"{ram} RAM" if ram else None)


def python_line(env: Environment) -> str:
    g = env.get
    kind, path = g("system", "python_env"), g("system", "python_env_path")
    where = f"{kind} {path}" if kind and path and kind != "system" else (kind or None)
    return _join(g("system", "python_version"), where, g("system", "python_executable"))


def driver_line(env: Environment) -> str:
    err = env.get("driver", "nvml_error")
    if err:
        return f"NVML error: {err}"
    version = env.get("driver", "driver_version")
    if not version:
        return _reason(env, "driver", "driver_version")
    cuda = env.get("driver", "cuda_driver_version")
    return _join(str(version), f"runs CUDA up to {cuda}" if cuda else None)


def cuda_line(env: Environment) -> str:
    g = env.get
    nvcc = g("cuda", "nvcc_version")
    return _join(
        f"nvcc {nvcc}" if nvcc else f"no nvcc ({_reason(env, 'cuda', 'nvcc_path')})",
        f"toolkit {g('cuda', 'toolkit_path')}" if g("cuda", "toolkit_path") else None,
        f"libcuda {g('cuda', 'libcuda_path')}" if g("cuda", "libcuda_path") else "libcuda not found",
    )


def torch_line(env: Environment) -> str:
    g = env.get
    if not g("torch", "installed"):
        return _reason(env, "torch", "version")
    cuda = g("torch", "cuda_version")
    meta = _join(str(g("torch", "version")), f"{g('torch', 'build')} build" if g("torch", "build") else None,
                 f"CUDA {cuda}" if cuda else None)
    if g("torch_runtime", "import_ok") is None:
        return meta
    if not g("torch_runtime", "import_ok"):
        return _join(meta, "import FAILED")
    avail = g("torch_runtime", "cuda_available")
    cudnn = g("torch_runtime", "cudnn_version")
    tf32 = g("torch_runtime", "tf32_matmul")
    return _join(
        meta,
        f"{g('torch_runtime', 'device_count')} CUDA device(s)" if avail else "CUDA not available",
        f"cuDNN {cudnn}" if cudnn else None,
        f"TF32 matmul {'on' if tf32 else 'off'}" if tf32 is not None else None,
        f"import {g('torch_runtime', 'import_s'):.1f} s" if isinstance(g("torch_runtime", "import_s"), float) else None,
    )


def triton_line(env: Environment) -> str:
    g = env.get
    if not g("triton", "installed"):
        return _reason(env, "triton", "version")
    ptxas = g("triton", "ptxas_version")
    max_sm = g("triton", "ptxas_max_sm")
    meta = _join(str(g("triton", "version")),
                 f"ptxas {ptxas}" + (f" (up to sm_{max_sm})" if max_sm else "") if ptxas else None)
    ok = g("triton_runtime", "smoke_ok")
    if ok is None:
        return meta
    compile_s = g("triton_runtime", "compile_s")
    smoke = "smoke kernel ok" if ok else "smoke kernel FAILED"
    return _join(meta, smoke, f"compile {compile_s:.2f} s" if isinstance(compile_s, float) else None)


def gpu_line(gpu: Gpu) -> str:
    """``NVIDIA H200, 140.4 GiB, cc 9.0, 132 SMs, SM 1980/1980 MHz, 4814 GB/s, 36 C, 126/700 W, P0``."""
    if gpu.lost:
        return f"lost: {gpu.lost}"
    g = gpu.get
    clock, clock_max = g("sm_clock_mhz"), g("sm_clock_max_mhz")
    power, limit = g("power_w"), g("power_limit_w")
    bw = g("theoretical_bandwidth_gbps")
    used = g("memory_used_bytes")
    total = gib(g("memory_total_bytes"))
    return _join(
        g("name") or "unknown GPU",
        f"{total}" + (f" ({gib(used)} used)" if isinstance(used, int) and used > 2**30 else "") if total else None,
        f"cc {g('compute_capability')}" if g("compute_capability") else None,
        f"{g('sm_count')} SMs" if g("sm_count") else None,
        f"SM {clock}/{clock_max} MHz" if clock is not None and clock_max is not None else None,
        f"{bw:.0f} GB/s" if isinstance(bw, (int, float)) else None,
        f"{g('temperature_c')} C" if g("temperature_c") is not None else None,
        f"{power:.0f}/{limit:.0f} W" if isinstance(power, (int, float)) and isinstance(limit, (int, float)) else None,
        g("pstate"),
    )


def environment_lines(env: Environment) -> list[tuple[str, str]]:
    """(layer, facts) pairs, top of the stack down, then one per GPU."""
    rows = [
        ("System", system_line(env)),
        ("CPU", cpu_line(env)),
        ("Python", python_line(env)),
        ("Driver", driver_line(env)),
        ("CUDA", cuda_line(env)),
        ("PyTorch", torch_line(env)),
        ("Triton", triton_line(env)),
    ]
    rows += [(f"GPU {gpu.index}", gpu_line(gpu)) for gpu in env.gpus]
    if not env.gpus:
        rows.append(("GPUs", "none visible"))
    return rows


def environment_renderable(env: Environment) -> RenderableType:
    """Label column padded by hand (a rich grid would pad every line to the widest one)."""
    rows = environment_lines(env)
    width = max(len(name) for name, _ in rows) + 2
    lines = []
    for name, value in rows:
        line = Text(name.ljust(width), style="bold")
        line.append(value)
        lines.append(line)
    return Group(*lines)


def print_environment(console: Console, env: Environment) -> None:
    took = f" (probed in {env.probe_s:.2f} s)" if env.probe_s is not None else ""
    console.print(Text(f"Environment{took}", style="bold underline"))
    console.print(environment_renderable(env))
