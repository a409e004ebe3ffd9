"""What a second run reuses (bench/compile_cache.py), the matmul race's pruning and recorded tiles, and the
kernels compiled ahead of the worker (bench/compile_ahead.py), without a GPU (issue 50)."""

from __future__ import annotations

import importlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envcheck.bench import compile_ahead, compile_cache
from envcheck.bench.kernels.tuning import POINTER, TMA_PERSISTENT, Tile
from envcheck.bench.suite import PlannedCase
from envcheck.harness.spawn import spawn
from envcheck.model import Case, Timing


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache root, and compile_cache's state as a process starts."""
    monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(tmp_path / "root"))
    monkeypatch.setattr(compile_cache, "_folder", None)
    monkeypatch.setattr(compile_cache, "_tiles", {})
    monkeypatch.setattr(compile_cache, "_new", {})
    monkeypatch.setattr(compile_cache, "_counts", {"compiled": 0, "raced": 0})
    return tmp_path / "root"


def test_the_folder_is_the_users_own_and_named_by_gpu_driver_torch_and_triton(cache: Path) -> None:
    name = compile_cache.folder_name("NVIDIA H200", "9.0", "580.159.04", "2.11.0+cu130", "3.6.0")
    assert name == "NVIDIA-H200_sm9.0_driver580.159.04_torch2.11.0+cu130_triton3.6.0"
    environ = {"TRITON_CACHE_DIR": "/mine/triton"}
    folder = compile_cache.use(name, environ)
    assert folder == cache / "compile" / name
    for f in (cache, cache / "compile", folder):
        assert stat.S_IMODE(os.lstat(f).st_mode) == 0o700
    # The user's own setting wins; Inductor's default (/tmp/torchinductor_<user>) is not used.
    assert environ == {"TRITON_CACHE_DIR": "/mine/triton", "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor")}


def test_a_cache_root_that_is_not_the_users_own_folder_is_not_used(cache: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path / "someone-elses"
    elsewhere.mkdir()
    cache.symlink_to(elsewhere)  # planted where the user's cache goes
    environ: dict[str, str] = {}
    folder = compile_cache.use("gpu", environ)
    assert not folder.is_relative_to(elsewhere) and not folder.is_relative_to(cache)
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700 and environ["TRITON_CACHE_DIR"] == str(folder / "triton")
    assert "symbolic link" in capsys.readouterr().err and not any(elsewhere.iterdir())


def test_the_driver_version_is_read_from_the_kernel_module(tmp_path: Path) -> None:
    f = tmp_path / "version"
    f.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue Oct 21 2025\nGCC version: 12\n")
    assert compile_cache.driver_version(str(f)) == "580.159.04"
    f.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n")
    assert compile_cache.driver_version(str(f)) == "570.86.15"
    assert compile_cache.driver_version(str(tmp_path / "none")) == "unknown"  # WSL2, or no driver


def test_race_winners_are_recorded_merged_and_read_back(cache: Path) -> None:
    tile = Tile(TMA_PERSISTENT, 128, 256, 64, 4, 8)
    folder = compile_cache.use("gpu", {})
    compile_cache.record("p1", tile)
    (folder / compile_cache.TILES_FILE).write_text(json.dumps({"p0": ["pointer", 64, 128, 64, 4, 4, 8],
                                                               "bad": ["wgmma", 1, 2, 3, 4, 5, 6], "short": [1]}))
    compile_cache.save()  # another GPU's worker wrote p0 meanwhile: both kept, the unreadable left out
    compile_cache._tiles.clear()
    compile_cache.use("gpu", {})
    assert compile_cache.tile("p1") == tile and compile_cache.tile("p0") == Tile(POINTER, 64, 128, 64, 4, 4)
    assert compile_cache.tile("bad") is None and compile_cache.tile("short") is None
    (folder / compile_cache.TILES_FILE).write_text("{not json")
    compile_cache.use("gpu", {})
    assert compile_cache.tile("p1") is None  # a broken record is no record, never a failed run


def test_a_first_call_is_a_hit_raced_or_a_miss(cache: Path) -> None:
    pytest.importorskip("triton")
    from triton import knobs

    before = compile_cache.mark()
    assert compile_cache.state("triton", before, compile_cache.mark()) is None  # no cache in use: unknown
    compile_cache.use("gpu", {})
    before = compile_cache.mark()
    assert compile_cache.state("triton", before, compile_cache.mark()) == "hit"
    compile_cache.record("p", Tile(POINTER, 64, 128, 64, 4, 4))
    assert compile_cache.state("triton", before, compile_cache.mark()) == "raced"
    knobs.compilation.listener(src=None, metadata=None, metadata_group=None, times=None, cache_hit=True)
    assert compile_cache.state("triton", before, compile_cache.mark()) == "raced"
    knobs.compilation.listener(src=None, metadata=None, metadata_group=None, times=None, cache_hit=False)
    assert compile_cache.state("triton", before, compile_cache.mark()) == "miss"
    assert compile_cache.state("torch", before, compile_cache.mark()) is None
    assert compile_cache.state("compile", (0, 0, 0, 0), (0, 0, 1, 0)) == "hit"
    assert compile_cache.state("compile", (0, 0, 0, 0), (0, 0, 1, 1)) == "miss"
    with pytest.raises(ValueError, match="cache state"):
        Case("relu", "triton", "fp32", "fp32", (1024,), launch=Timing.from_samples("cuda_events", [5.0]),
             cache="warm")


# --------------------------------------------------------------------------- the matmul race


def _operands(m: int, n: int, k: int, dtype: str = "fp16", kmajor: bool = False) -> tuple[Any, Any, Any]:
    torch = pytest.importorskip("torch")
    t = {"fp16": torch.float16, "fp32": torch.float32}[dtype]
    b = torch.zeros(n, k, dtype=t).t() if kmajor else torch.zeros(k, n, dtype=t)
    return torch.zeros(m, k, dtype=t), b, torch.zeros(m, n, dtype=t)


def test_candidates_that_never_won_on_an_architecture_are_not_raced_there() -> None:
    pytest.importorskip("triton")
    mm = importlib.import_module("envcheck.bench.kernels.matmul")
    a, b, out = _operands(1024, 1024, 1024, "fp32", kmajor=True)
    hopper = mm.candidates(a, b, out, "fp32", (9, 0))
    assert {t.kind for t in hopper} == {POINTER} and len(hopper) == 2  # IEEE: two pointer tiles ever won
    assert len(mm.candidates(a, b, out, "tf32", (9, 0))) == 4
    assert len(mm.candidates(a, b, out, "fp32", (8, 0))) == 3  # no record there: every pointer tile
    square = mm.candidates(*_operands(4096, 4096, 4096), "fp16", (9, 0))
    tall = mm.candidates(*_operands(16384, 1024, 1024), "fp16", (9, 0))
    assert len(square) == 6 and Tile(POINTER, 256, 128, 64, 3, 8) in tall  # the tall tile, for tall outputs


def test_a_recorded_tile_is_used_without_a_race_and_a_raced_one_is_recorded(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    mm = importlib.import_module("envcheck.bench.kernels.matmul")
    from envcheck.bench.kernels import tuning

    monkeypatch.setitem(mm.DEVICES, -1, (132, (9, 0)))  # CPU tensors' device, as a Hopper
    a, b, out = _operands(1024, 1024, 1024)
    key = compile_cache.problem_key(a, b, out, "fp16")
    compile_cache.use("gpu", {})
    won = Tile(POINTER, 64, 128, 64, 4, 4)
    monkeypatch.setattr(tuning, "fastest", lambda candidates, measure=None: won)
    assert mm._race(a, b, out, "fp16")[0] == won and compile_cache.tile(key) == won
    compile_cache.save()
    compile_cache.use("gpu", {})  # the next run

    def no_race(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("raced although a tile was recorded")

    monkeypatch.setattr(tuning, "fastest", no_race)
    before = compile_cache.mark()
    assert mm._race(a, b, out, "fp16")[0] == won
    assert compile_cache.mark()[1] == before[1]  # no race counted


# --------------------------------------------------------------------------- compiling ahead


def test_triton_cases_are_dealt_by_kernel_family_to_a_few_children() -> None:
    cases = [PlannedCase(op, impl, d, d, shape) for op, shape in (("vector_add", (1024,)), ("vector_add", (4096,)))
             for d in ("fp32", "fp16") for impl in ("torch", "triton", "compile")]
    cases.append(PlannedCase("vector_add", "triton", "fp32", "fp32", (1024,)))  # a repeat: compiled once
    shares = compile_ahead.shares(cases, 3)
    assert shares == [[["vector_add", "fp32", "fp32", [1024]], ["vector_add", "fp32", "fp32", [4096]]],
                      [["vector_add", "fp16", "fp16", [1024]], ["vector_add", "fp16", "fp16", [4096]]]]
    assert [compile_ahead.children(n) for n in (2, 4, 8, 16, 128)] == [0, 0, 1, 4, 4]


VERIFY = """
import json, sys
import torch
from envcheck.bench import compile_ahead, impls
from triton import knobs
seen = {"hit": 0, "miss": 0}
knobs.compilation.listener = lambda **kw: seen.__setitem__("hit" if kw["cache_hit"] else "miss", seen["hit" if kw["cache_hit"] else "miss"] + 1)
class Real(compile_ahead.Stand):  # a real tensor, its real pointer
    def data_ptr(self):
        return int(self._t.data_ptr())
make_inputs, make_output = impls.make_inputs, impls.make_output
impls.make_inputs = lambda op, shape, dtype, device, gen: make_inputs(op, shape, dtype, "cpu", torch.Generator().manual_seed(0))
impls.make_output = lambda op, shape, dtype, device: make_output(op, shape, dtype, "cpu")
compile_ahead.Stand = Real
print(json.dumps([compile_ahead.compile_cases(json.loads(sys.argv[1])), seen]))
"""


@pytest.mark.slow
def test_kernels_compiled_ahead_on_stand_ins_are_the_ones_real_tensors_ask_for(tmp_path: Path) -> None:
    """Compiled for Hopper on this machine (Triton's own compiler; no GPU), then asked for with real tensors:
    every kernel is found in the cache, none compiled again (the stand-ins' cache keys are the real ones)."""
    pytest.importorskip("triton")
    plan = {"cc": [9, 0], "sms": 132, "control": None,
            "cases": [["vector_add", "fp32", "fp32", [1000003]], ["softmax", "bf16", "bf16", [1000, 4097]],
                      ["matmul", "fp32", "fp32", [1000, 1001, 999]], ["linear_fwbw", "fp16", "fp16", [64, 48, 32]]]}
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton"), "CUDA_VISIBLE_DEVICES": ""}
    ahead = spawn("envcheck.bench.compile_ahead:child", plan, timeout=900, env={k: env[k] for k in (
        "TRITON_CACHE_DIR", "CUDA_VISIBLE_DEVICES")})
    assert ahead.done, ahead.stderr_tail[-2000:]
    if not str(ahead.result).startswith("4 cases compiled"):
        pytest.skip(f"Triton cannot compile for Hopper here: {ahead.result} {ahead.stderr_tail[-300:]}")
    again = subprocess.run([sys.executable, "-c", VERIFY, json.dumps(plan)], env=env, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    (done, failed), seen = json.loads(again.stdout.splitlines()[-1])
    assert (done, failed) == (4, 0) and seen["miss"] == 0 and seen["hit"] >= 4
