"""``envcheck bench``: the Op API's validation, finding the ops of a source in a subprocess (a
bad source is one line and exit 2), planning them like the built-in suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envcheck.errors import UsageError
from envcheck.userbench import DeclarationError, Op
from envcheck.userbench import discover as disc
from envcheck.userbench import discover as uplan
from tests.test_suite import cpu_env

ROOT = Path(__file__).resolve().parents[1]


def inputs(shape, dtype, device, generator):
    import torch

    return (torch.randn(*shape, generator=generator, device=device).to(dtype),)


def op(**over):
    fields = dict(name="double", impls={"torch": lambda x: x * 2, "mine": lambda x: x + x},
                  reference=lambda x: x * 2, inputs=inputs, shapes=[(1000,), (4096,)], dtypes=["fp32", "fp16"],
                  bytes=lambda s, d: 2 * s[0] * (4 if d == "fp32" else 2))
    return Op(**{**fields, **over})


# --------------------------------------------------------------------------- the API


def test_an_op_declares_its_cost_at_every_shape_and_dtype():
    spec = op(flops=lambda s, d: s[0], accumulation=lambda s: 1, roundings=2).spec()
    assert spec.name == "double" and spec.family == "declared" and not spec.compute_bound
    assert spec.impls == ("torch", "mine") and spec.baseline == "torch"  # the first is the baseline
    assert spec.traffic((4096,), "fp16").bytes == 2 * 4096 * 2 and spec.traffic((4096,), "fp16").flops == 4096
    assert {(c.shape, c.dtype) for c in spec.declared.costs} == {((1000,), "fp32"), ((1000,), "fp16"),
                                                               ((4096,), "fp32"), ((4096,), "fp16")}
    assert op(baseline="mine").spec().baseline == "mine"


@pytest.mark.parametrize(("over", "fragment"), [
    (dict(name="matmul"), "built-in"),
    (dict(name="no spaces"), "op name"),
    (dict(impls={}), "non-empty mapping"),
    (dict(impls={"bad name": lambda x: x}), "implementation name"),
    (dict(impls={"torch": 3}), "callable or a 'module:function'"),
    (dict(reference=None), "reference must be a callable"),
    (dict(inputs="x"), "inputs must be a callable"),
    (dict(shapes=[]), "shapes"),
    (dict(shapes=[(0,)]), "shapes"),
    (dict(shapes=[(4,), (4,)]), "shapes"),
    (dict(shapes=5), "shapes"),
    (dict(dtypes=["fp8"]), "dtypes"),
    (dict(baseline="nobody"), "baseline"),
    (dict(roundings=-1), "roundings"),
    (dict(compute_bound="yes"), "compute_bound"),
    (dict(flops=4), "flops must be a callable"),
])
def test_a_bad_declaration_is_refused_where_it_is_made_naming_the_field(over, fragment):
    with pytest.raises(DeclarationError, match=fragment):
        op(**over)


@pytest.mark.parametrize(("over", "fragment"), [
    (dict(bytes=lambda s, d: 0), "bytes must return a positive integer"),
    (dict(bytes=lambda s, d: 1.5), "bytes must return"),
    (dict(flops=lambda s, d: -1), "flops must return a non-negative"),
    (dict(accumulation=lambda s: None), "accumulation must return"),
])
def test_a_cost_function_returning_nonsense_is_refused(over, fragment):
    with pytest.raises(DeclarationError, match=fragment):
        op(**over).spec()


# --------------------------------------------------------------------------- the source argument


def write(tmp_path: Path, text: str, name: str = "mine.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


GOOD = """
    import torch
    from envcheck.userbench import Op

    def inputs(shape, dtype, device, generator):
        return (torch.randn(*shape, generator=generator, device=device).to(dtype),)

    DOUBLE = Op(name="double", impls={"torch": lambda x: x * 2}, reference=lambda x: x * 2, inputs=inputs,
                shapes=[(64,)], bytes=lambda s, d: 8 * s[0])
    MORE = [Op(name="triple", impls={"torch": lambda x: x * 3}, reference=lambda x: x * 3, inputs=inputs,
               shapes=[(64,)], bytes=lambda s, d: 8 * s[0])]
"""


def test_a_file_declares_its_top_level_ops_and_lists_of_them(tmp_path):
    specs = disc.discover(disc.source_argument(write(tmp_path, GOOD)))
    assert [s.name for s in specs] == ["double", "triple"]
    assert specs[0].traffic((64,), "fp32").bytes == 512


@pytest.mark.slow  # two discoveries importing torch (~5 s); a file's discovery stays fast
def test_module_object_names_one_object(tmp_path, monkeypatch):
    write(tmp_path, GOOD, "userops.py")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{tmp_path}")
    assert [s.name for s in disc.discover(disc.source_argument("userops:MORE"))] == ["triple"]
    with pytest.raises(UsageError, match="has no 'NOPE'"):
        disc.discover("userops:NOPE")


@pytest.mark.parametrize(("text", "fragment"), [
    ("def broken(:\n", "SyntaxError: .*mine.py, line 1"),
    ("import torch\nX = 1\n", "declares no envcheck.userbench.Op"),
    ("import no_such_module_for_envcheck\n", "ModuleNotFoundError: No module named 'no_such_module_for_envcheck'"),
    ("raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"),
    ("import os\nos._exit(3)\n", r"importing it ended the process \(exit status 3\)"),
    ("from envcheck.userbench import Op\nX = Op(name='x y', impls={}, reference=None, inputs=None, shapes=[], "
     "bytes=None)\n", "op name 'x y'"),
    ("print('chatter on stdout')\nraise SystemExit(0)\n", "SystemExit"),
])
def test_a_source_that_declares_nothing_runnable_is_one_line(tmp_path, text, fragment):
    with pytest.raises(UsageError, match=fragment) as got:
        disc.discover(disc.source_argument(write(tmp_path, text)))
    assert "\n" not in str(got.value)


def test_a_source_whose_import_hangs_is_stopped(tmp_path):
    with pytest.raises(UsageError, match="did not finish within 1.5 s"):
        disc.discover(write(tmp_path, "import time\ntime.sleep(600)\n"), timeout=1.5)


@pytest.mark.parametrize(("arg", "fragment"), [
    ("missing.py", "no such file"), ("somedir", "not a file"), ("notes.txt", "not a Python file"),
])
def test_a_bad_source_argument_is_refused_before_anything_runs(tmp_path, monkeypatch, arg, fragment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "somedir").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UsageError, match=fragment):
        disc.source_argument(arg)


def test_the_cli_says_one_line_and_exits_2_for_a_bad_source(tmp_path):
    bad = write(tmp_path, "X = 1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for arg in (bad, str(tmp_path / "missing.py")):
        done = subprocess.run([sys.executable, "-m", "envcheck", "bench", arg, "--out-dir", str(tmp_path / "r")],
                              capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        errors = [ln for ln in done.stderr.splitlines() if "error" in ln]
        assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())  # nothing written


# --------------------------------------------------------------------------- planning


def test_the_plan_has_every_declared_case_baseline_first_with_the_suite_s_settings():
    spec = op(baseline="mine").spec()
    p = uplan.plan((spec,), "src.py", False, 0, cpu_env())
    assert p.backend == "cpu" and p.ops == (spec,) and p.source == "src.py"
    assert [(c.impl, c.dtype, c.shape) for c in p.cases][:2] == [("mine", "fp32", (1000,)), ("torch", "fp32", (1000,))]
    assert len(p.cases) == 2 * 2 * 2
    assert p.settings.impls == ("torch", "mine") and p.settings.ops == ("double",)
    from envcheck.bench import suite

    assert p.settings.min_samples == suite.CPU_SETTINGS.min_samples  # the same presets as envcheck run


def test_the_plan_records_triton_s_interpreter_on_a_cpu():
    # TRITON_INTERPRET=1 in the worker's environment: the report says its Triton rows ran interpreted.
    spec = op(baseline="mine").spec()
    assert uplan.plan((spec,), "src.py", False, 0, cpu_env(), interpret=True).settings.interpret
    assert not uplan.plan((spec,), "src.py", False, 0, cpu_env()).settings.interpret


def test_a_lost_gpu_is_noted_in_the_plan_of_declared_ops_as_in_the_suite_s():
    """One planner: what the suite says about the device (here a GPU NVML lost), a bench plan says too."""
    import dataclasses

    from envcheck.bench import suite
    from envcheck.commands.options import RunOptions
    from envcheck.model import Note
    from tests.test_suite import gpu_env

    env = gpu_env()
    env = dataclasses.replace(env, gpus=(dataclasses.replace(env.gpus[0], lost="GPU is lost"),))
    lost = Note("bench.gpu_lost", {"gpu_index": 0, "detail": "GPU is lost"})
    assert lost in suite.plan(RunOptions(no_jax=True), env).notes
    assert lost in uplan.plan((op().spec(),), "src.py", False, 0, env).notes
