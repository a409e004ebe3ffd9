"""``scripts/setup.sh`` installs what the README's commands need (issue 38 item 2): on a machine
without an NVIDIA GPU and without Triton, the pinned Triton (its interpreter runs the CPU commands);
never a CUDA build of torch. The script runs against a fake ``.venv/bin/python`` that records what
pip is asked to do: the process boundary (a shell script) is the point."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
# A venv's python: modules in $HAVE are importable; pip calls are logged, never run.
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "pip ${*:3}" >> "$LOG"; exit 0; fi
if [ "$1" = "-c" ]; then
  for m in $HAVE; do case "$2" in *"find_spec('$m')"*) exit 0;; esac; done
  exit 1
fi
exit 0
"""


def _setup(tmp_path: Path, have: str, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    if any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/dxg")):
        pytest.skip("this machine has an NVIDIA device: the script takes its GPU branch")
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", tree / "scripts" / "setup.sh")
    python = tree / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    log = tmp_path / "pip.log"
    path = ":".join(p for p in os.environ["PATH"].split(":") if not (Path(p) / "nvidia-smi").exists())
    env = {"PATH": path, "HAVE": have, "LOG": str(log), "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(tree / "scripts" / "setup.sh"), *args], capture_output=True, text=True,
                          env=env, timeout=60)
    return done, log.read_text().splitlines() if log.exists() else []


def test_a_cpu_machine_with_torch_but_no_triton_gets_the_pinned_triton(tmp_path: Path) -> None:
    done, pip = _setup(tmp_path, "torch")
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("pip install") and "triton==" in line for line in pip), pip
    assert not any("torch" in line for line in pip), pip  # the torch it has is kept
    assert "TRITON_INTERPRET=1" in done.stdout


def test_nothing_is_installed_for_torch_or_triton_where_both_are_present(tmp_path: Path) -> None:
    done, pip = _setup(tmp_path, "torch triton")
    assert done.returncode == 0, done.stderr
    assert [line for line in pip if "triton" in line or "torch" in line] == []


def test_a_cpu_machine_without_torch_gets_the_cpu_build_never_the_cuda_one(tmp_path: Path) -> None:
    done, pip = _setup(tmp_path, "")
    assert done.returncode == 0, done.stderr
    torch = [line for line in pip if "torch" in line]
    assert torch and all("+cpu" in line for line in torch), torch


def test_the_test_set_up_says_what_it_installs(tmp_path: Path) -> None:
    """``--test`` installs the test extra, JAX among it: each is named before pip runs (issue 51)."""
    import re

    (tmp_path / "tree").mkdir()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "tree" / "pyproject.toml")
    done, pip = _setup(tmp_path, "torch triton", "--test")
    assert done.returncode == 0, done.stderr
    test_extra = re.search(r"^test = \[(.*?)\]", (ROOT / "pyproject.toml").read_text(), re.S | re.M)
    assert test_extra is not None
    names = re.findall(r'"([A-Za-z0-9_.-]+)', test_extra[1])
    said = next(line for line in done.stdout.splitlines() if "test tools" in line)
    assert "jax" in names and all(n in said for n in names), said
    assert any(line.startswith("pip install") and "[test]" in line for line in pip)
