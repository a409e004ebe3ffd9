"""``envcheck snapshot``, ``--replay``: a machine recorded at the seams and probed again elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck import model, snapshot
from envcheck.checks import evaluate
from envcheck.probes.collect import collect
from envcheck.probes.recording import RecordingHost
from envcheck.probes.replay import ReplayHost

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).parent / "fixtures" / "snapshots" / "corpus"
LAPTOP = CORPUS / "wsl-rtx4070-laptop-torch24.json"


def envcheck(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=full)


def facts(env: model.Environment) -> dict:
    data = model.to_dict(env)
    data.pop("probe_s")
    # Free memory and disk change between two reads of the same machine.
    for key in ("ram_available_bytes", "disk_free_bytes"):
        data["sections"]["system"].pop(key, None)
    return data


@pytest.mark.slow  # this machine probed twice with its runtimes (~4 s); the corpus replays stay fast
def test_this_machine_replayed_from_its_snapshot_gives_the_same_facts() -> None:
    """Record through the seams, replay through the seams: the probes cannot tell the difference."""
    snap = snapshot.capture(timeout=120)
    restored = snapshot.loads(snapshot.dumps(snap))
    host, nvml = snapshot.replay(restored)
    replayed = collect(host=host, nvml=nvml, runtime=True, timeout=120)
    live_host, live_nvml = snapshot.replay(snap)
    again = collect(host=live_host, nvml=live_nvml, runtime=True, timeout=120)
    assert facts(replayed) == facts(again)
    live = collect(runtime=False)
    for section in ("system", "wsl", "driver", "cuda", "env", "torch", "triton"):
        a, b = facts(replayed)["sections"][section], facts(live)["sections"][section]
        assert a == b, section
    # What a GPU does from one second to the next (clocks, power, temperature, load) is left out.
    stable = ("name", "uuid", "pci_bus_id", "architecture", "memory_total_bytes", "compute_capability", "sm_count",
              "sm_clock_max_mhz", "mem_clock_max_mhz", "memory_bus_width_bits",
              "pcie_gen_max", "pcie_width_max", "power_limit_w", "ecc_mode_current", "mig_mode", "persistence_mode",
              "vbios_version")
    assert [{k: g.facts[k] for k in stable} for g in replayed.gpus] == \
        [{k: g.facts[k] for k in stable} for g in live.gpus]


def test_a_recording_host_keeps_only_what_probes_read_and_redacts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz0123")
    monkeypatch.setenv("TRITON_CACHE_URL", "https://bob:hunter2hunter2@cache.example/x")
    monkeypatch.setenv("UNRELATED_NOTE", "not read by any probe")
    host = RecordingHost()
    # A child never gets the secret (harness/env.py); one it prints all the same (read from a file) is redacted.
    code = "import os; print(os.environ.get('HF_TOKEN', 'hf_abcdefghijklm' + 'nopqrstuvwxyz0123'))"
    res = host.run([sys.executable, "-c", code], timeout=30)
    assert res.stdout.strip() == "<redacted>"
    collect(host=host, nvml=None, runtime=False)
    section = host.section()
    text = json.dumps(section)
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in text and "hunter2hunter2" not in text
    assert section["environ"]["TRITON_CACHE_URL"] == "https://<redacted>@cache.example/x"
    assert "UNRELATED_NOTE" not in section["environ"] and "HF_TOKEN" not in section["environ"]
    assert section["commands"][0]["stdout"].strip() == "<redacted>"


def test_a_replay_host_answers_like_the_file_system_it_was_recorded_from(tmp_path: Path) -> None:
    real = tmp_path / "lib"
    real.mkdir()
    (real / "libcuda.so.1.1").write_text("elf")
    (real / "libcuda.so.1").symlink_to("libcuda.so.1.1")
    (tmp_path / "alias").symlink_to(real)
    rec = RecordingHost()
    probes = [rec.realpath(str(tmp_path / "alias" / "libcuda.so.1")), rec.listdir(str(real)),
              rec.glob(str(real / "libcuda.so*")), rec.exists(str(tmp_path / "missing")),
              rec.is_symlink(str(real / "libcuda.so.1")), rec.read_text(str(real / "libcuda.so.1"))]
    replay = ReplayHost.from_section(json.loads(json.dumps(rec.section())))
    again = [replay.realpath(str(tmp_path / "alias" / "libcuda.so.1")), replay.listdir(str(real)),
             replay.glob(str(real / "libcuda.so*")), replay.exists(str(tmp_path / "missing")),
             replay.is_symlink(str(real / "libcuda.so.1")), replay.read_text(str(real / "libcuda.so.1"))]
    assert again == probes
    with pytest.raises(OSError, match="not captured"):
        replay.disk_free(str(tmp_path))


@pytest.mark.slow
def test_snapshot_command_writes_a_new_file_and_never_overwrites(tmp_path: Path) -> None:
    out = tmp_path / "mine.json"
    res = envcheck("snapshot", "--out", str(out), "--timeout", "120", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    snap = snapshot.load(out)
    assert snap.meta["envcheck_version"] and snap.host["files"] and "runs" in snap.host
    assert f"envcheck check --replay {out}" in res.stderr
    before = out.read_text()
    res = envcheck("snapshot", "--out", str(out), cwd=tmp_path)
    assert res.returncode == 2 and "already exists" in res.stderr
    assert out.read_text() == before


def test_check_and_probe_replay_a_snapshot_on_any_machine(tmp_path: Path) -> None:
    res = envcheck("check", "--replay", str(LAPTOP), "--format", "json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    report = model.loads(res.stdout)
    assert report.host == "wsl-laptop"
    assert report.environment.gpus[0].get("name") == "NVIDIA GeForce RTX 4070 Laptop GPU"
    assert {c.id: c.status for c in report.checks}["wsl.libcuda_symlinks"] == "warn"
    res = envcheck("probe", "--replay", str(LAPTOP), cwd=tmp_path)
    assert res.returncode == 0 and "NVIDIA GeForce RTX 4070 Laptop GPU" in res.stdout


@pytest.mark.parametrize(("content", "error"), [
    ({"format": "envcheck-snapshot", "version": 99}, "snapshot version 99 is newer than this envcheck"),
    ({"format": "envcheck-report", "schema_version": 1}, "not an envcheck snapshot"),
    ("{not json", "not valid JSON"),
])
def test_replay_refuses_what_it_cannot_read(tmp_path: Path, content: object, error: str) -> None:
    path = tmp_path / "snap.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    res = envcheck("check", "--replay", str(path), cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    [line] = res.stderr.strip().splitlines()
    assert line.startswith(f"envcheck check: error: {path}: ") and error in line


def test_a_runtime_the_snapshot_lacks_is_not_run_rather_than_failed() -> None:
    snap = snapshot.load(CORPUS / "wsl-rtx3060-laptop-cuda-err.json")
    host, nvml = snapshot.replay(snap)
    env = collect(host=host, nvml=nvml, runtime=True)
    assert env.fact("triton_runtime", "smoke_ok").reason == "not run: the snapshot holds no run of it"
    assert all(c.status != "fail" for c in evaluate(env))
