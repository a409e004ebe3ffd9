"""tools/evidence/verify_timer.py --user: the command line, the rows a user's file gives, the usage errors
(one line, exit status 2, before any GPU is looked for) and the mode end to end on the CPU with the
GPU's pieces faked (tests/verify_timer_fakes.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from verify_timer_fakes import fake_gpu, load_script

from envcheck.userbench import Op


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch):
    module = load_script(monkeypatch)
    # discover_ops puts the checkout on PYTHONPATH for its subprocess: undone after each test.
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    return module


def _op(name: str, shapes, dtypes=("fp32", "fp16"), bytes_=None, baseline=None) -> Op:
    def each(shape, dtype):
        return 2 * shape[0] * shape[1] * (4 if dtype == "fp32" else 2)

    return Op(name=name, impls={"torch": lambda x: x, "mine": lambda x: x}, reference=lambda x: x,
              inputs=lambda shape, dtype, device, generator: (), shapes=shapes, dtypes=dtypes,
              bytes=bytes_ or each, baseline=baseline)


def test_parse_args_gives_the_mode_or_one_usage_line(script, tmp_path: Path) -> None:
    user = tmp_path / "ops.py"
    user.write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert script.parse_args([]) == script.Args("suite")
    assert script.parse_args(["--workloads"]) == script.Args("workloads")
    assert script.parse_args(["--user", str(user)]) == script.Args("user", str(user.resolve()), str(user))
    assert script.parse_args([f"--user={user}"]) == script.Args("user", str(user.resolve()), str(user))
    assert script.parse_args(["--user", "pkg.mod:OPS"]) == script.Args("user", "pkg.mod:OPS", "pkg.mod:OPS")
    for bad in (["--user"], ["--bogus"], ["--workloads", "--user", str(user)], ["--user", str(user), "x"],
                ["--user="]):
        assert script.parse_args(bad) == script.USAGE, bad
    missing = script.parse_args(["--user", str(tmp_path / "nope.py")])
    assert missing == f"verify_timer: {tmp_path / 'nope.py'}: no such file (give FILE.py or module:object)"
    assert script.parse_args(["--user", str(tmp_path / "notes.txt")]).endswith("not a Python file (.py)")
    assert script.parse_args(["--user", str(tmp_path)]).endswith("not a file (give FILE.py or module:object)")


def test_user_rows_are_each_dtypes_largest_shape_with_a_working_set_of_3x_l2(script) -> None:
    # Largest by elements: (1000, 1000), declared first; fp32 moves 8e6 bytes there, fp16 4e6.
    wsum = _op("wsum", [(1000, 1000), (10, 10), (2000, 10)], baseline="mine").spec()
    assert script.user_rows([wsum], 2_000_000) == [("wsum", "fp32", (1000, 1000), ("mine", "torch"))]
    assert script.user_rows([wsum], 1_000_000) == [("wsum", "fp32", (1000, 1000), ("mine", "torch")),
                                                   ("wsum", "fp16", (1000, 1000), ("mine", "torch"))]
    assert script.user_rows([wsum], 3_000_000) == []
    # The largest shape by element count, even where a smaller one declares more bytes: never a fallback.
    odd = _op("odd", [(10, 10), (100, 100)], dtypes=("bf16",),
              bytes_=lambda shape, dtype: 10**9 if shape == (10, 10) else 300).spec()
    assert [(row, ws) for row, ws in script.largest_shapes([odd])] == [(("odd", "bf16", (100, 100),
                                                                         ("torch", "mine")), 300)]
    assert script.user_rows([odd], 101) == []
    assert script.user_rows([odd], 100) == [("odd", "bf16", (100, 100), ("torch", "mine"))]  # exactly 3x: kept
    assert script.user_rows([odd, wsum], 2_000_000) == [("wsum", "fp32", (1000, 1000), ("mine", "torch"))]


@pytest.mark.parametrize(("text", "says"), [
    ("X = 1\n", "declares no envcheck.userbench.Op at its top level"),
    ("def f(:\n", "SyntaxError: "),
    ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
])
def test_a_bad_user_file_is_one_line_and_exit_status_2_before_any_gpu(script, tmp_path: Path, capsys,
                                                                       monkeypatch, text: str, says: str) -> None:
    monkeypatch.setattr(script, "_unusable", lambda: pytest.fail("the GPU was looked for before the file"))
    user = tmp_path / "user_ops.py"
    user.write_text(text)
    assert script.main(["--user", str(user)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"verify_timer: {user}: ") and says in err, err
    assert "Traceback" not in err


def test_bad_flags_and_a_missing_file_are_one_line_and_exit_status_2(script, tmp_path: Path, capsys) -> None:
    assert script.main(["--user"]) == 2
    assert capsys.readouterr() == ("", script.USAGE + "\n")
    assert script.main(["--user", str(tmp_path / "gone.py")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "gone.py: no such file" in err


USER_FILE = '''
import torch

from envcheck.userbench import Op


def inputs(shape, dtype, device, generator):
    rows, cols = shape
    return (torch.randn(rows, cols, generator=generator, device=device).to(dtype),
            torch.randn(rows, cols, generator=generator, device=device).to(dtype))


def cost(shape, dtype):
    return (2 * shape[0] * shape[1] + shape[0]) * (4 if dtype == "fp32" else 2)


WSUM = Op(name="wsum", impls={"torch": lambda x, v: (x * v).sum(-1),
                              "mine": lambda x, v: torch.einsum("ij,ij->i", x, v)},
          reference=lambda x, v: (x * v).sum(-1), inputs=inputs, shapes=[(8, 16), (512, 512)], dtypes=["fp32"],
          bytes=cost, accumulation=lambda shape: shape[1])
SMALL = Op(name="small", impls={"torch": lambda x, v: x + v}, reference=lambda x, v: x + v, inputs=inputs,
           shapes=[(4, 4)], bytes=cost)
'''


@pytest.fixture(scope="module")
def user_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    user = tmp_path_factory.mktemp("user") / "two_ops.py"
    user.write_text(USER_FILE)
    return user


_DISCOVERED: dict[str, object] = {}


@pytest.fixture
def faked(script, monkeypatch: pytest.MonkeyPatch, user_file: Path):
    """The script with the GPU's pieces faked (verify_timer_fakes) and a user file of two ops:
    ``wsum`` (512x512 fp32: 2 MiB) and ``small`` (4x4)."""
    l2 = {"bytes": 1 << 20}
    fake_gpu(monkeypatch, script, l2)
    # Two rounds of envcheck beside do_bench_cudagraph (five on a GPU): what the output says of several rounds
    # (each row's medians, ratios and spread) at 2/5 of the time of the sampling on the CPU.
    monkeypatch.setattr(script, "ROUNDS", 2)
    # The one user file is discovered once for the module (a subprocess importing torch, as envcheck bench
    # finds ops: tested in test_userbench.py), its answer reused by the tests after the first.
    real = script.discover_ops
    monkeypatch.setattr(script, "discover_ops",
                        lambda source: _DISCOVERED[source] if source in _DISCOVERED
                        else _DISCOVERED.setdefault(source, real(source)))
    return script, user_file, l2


@pytest.mark.slow  # every impl sampled warm and cold on the CPU (~4 s); the exit-status rules below stay fast
def test_user_mode_measures_every_impl_warm_then_cold_and_judges_the_warm_rows(faked, capsys, monkeypatch) -> None:
    script, user, _ = faked
    # At 3x L2 (the script's rule) nothing rotates; at 1x, wsum's 2 MiB against a 1 MiB L2 is kept and
    # l2.py gives its cold-L2 measurement ceil(3 MiB / 2 MiB) = 2 sets: the two runs differ as they should.
    monkeypatch.setattr(script, "USER_L2_MULTIPLE", 1)
    monkeypatch.chdir(user.parent)
    status = script.main(["--user", user.name])
    out = capsys.readouterr().out
    assert status in (0, 1), out  # a host clock against a host clock need not agree within 3%
    lines = out.splitlines()
    assert lines[0].startswith("GPU: Fake GPU")
    assert lines[1].startswith(f"{user.name}: every declared op") and str(user.parent) not in out, out
    assert any(ln.startswith("  left out: small fp32 4×4 (working set 144 bytes)") for ln in lines), out
    warm = [i for i, ln in enumerate(lines) if ln.startswith("wsum fp32 512×512 ") and "cold-L2" not in ln]
    cold = [i for i, ln in enumerate(lines) if ln.startswith("wsum fp32 512×512 cold-L2 ")]
    # case (3 words, 4 cold), impl, envcheck, cudagraph, ratio, sets: the baseline first, then the others.
    assert [tuple(lines[i].split()[3:8:4]) for i in warm] == [("torch", "1"), ("mine", "1")], out
    assert [tuple(lines[i].split()[4:9:4]) for i in cold] == [("torch", "2"), ("mine", "2")], out
    assert max(warm) < min(cold)  # like with like first
    verdict = next(ln for ln in lines if ln.startswith("largest deviation from do_bench_cudagraph:"))
    assert verdict.endswith("(allowed 3%; only the rows with L2 not kept cold decide)"), verdict
    assert any(ln.startswith("largest deviation of the cold-L2 rows:") and "not judged" in ln for ln in lines)
    assert "failed" not in out


@pytest.mark.parametrize(("warm_us", "cold_us", "status"), [(101.0, 150.0, 0), (104.0, 100.0, 1)])
def test_only_the_warm_rows_decide_the_exit_status(faked, capsys, monkeypatch, warm_us, cold_us, status) -> None:
    """do_bench_cudagraph reads 100 us; envcheck ``warm_us`` with L2 not kept cold, ``cold_us`` cold."""
    script, user, l2 = faked
    l2["bytes"] = 1 << 18  # wsum's 2 MiB is at least 3x: its row is kept

    def timing(us: float):
        return type("T", (), {"median_us": us, "n": 30, "cv": 0.01, "iqr_us": 0.01 * us, "samples_us": [us] * 30})()

    def measure_row(rt, nvml, target, op, dtype, shape, impls):
        cold = rt.settings.cold_l2
        label = f"{op} {dtype} 512×512" + (script.COLD if cold else "")
        us = cold_us if cold else warm_us
        return [script.Result(label, impl, rotation_sets=1, gpu=[timing(us)] * script.ROUNDS,
                              launch=[timing(5.0)] * script.ROUNDS, theirs=[100.0] * script.ROUNDS) for impl in impls]

    monkeypatch.setattr(script, "measure_row", measure_row)
    assert script.main(["--user", str(user)]) == status
    lines = capsys.readouterr().out.splitlines()
    marked = [ln for ln in lines if "<-- off by more than 3%" in ln]
    assert len(marked) == 2  # both implementations of the row that is off
    assert all(("cold-L2" in ln) == (status == 0) and ln.endswith("(not judged)") == (status == 0) for ln in marked)
    verdict = next(ln for ln in lines if ln.startswith("largest deviation from do_bench_cudagraph:"))
    assert verdict.startswith(f"largest deviation from do_bench_cudagraph: {abs(warm_us - 100):.2f}%")
    assert any(ln.startswith(f"largest deviation of the cold-L2 rows: {abs(cold_us - 100):.2f}%") for ln in lines)


def test_user_mode_without_a_gpu_is_one_line_and_exit_status_2(faked, capsys, monkeypatch) -> None:
    script, user, _ = faked
    monkeypatch.setattr(script, "_unusable", lambda: "no CUDA GPU visible to PyTorch")
    assert script.main(["--user", str(user)]) == 2
    assert capsys.readouterr() == ("", "verify_timer: needs a CUDA GPU with torch and Triton: "
                                       "no CUDA GPU visible to PyTorch\n")


def test_user_mode_with_no_row_at_3x_l2_says_so_and_exits_2(faked, capsys) -> None:
    script, user, l2 = faked
    l2["bytes"] = 1 << 20  # wsum's 2 MiB is below 3 MiB: no row
    assert script.main(["--user", str(user)]) == 2
    out, err = capsys.readouterr()
    assert "GPU:" not in out
    assert err.count("\n") == 1 and "nothing to compare" in err and "at least 3x this GPU's L2 (1 MiB)" in err, err
