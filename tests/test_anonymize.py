"""``--anonymize``: stable keyed pseudonyms for hosts, users, addresses, GPU UUIDs and serials."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck import model, snapshot
from envcheck.anonymize import Anonymizer, anonymize_snapshot, key_path, load_key
from envcheck.checks import evaluate
from envcheck.probes.collect import collect

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).parent / "fixtures" / "snapshots"
KEY = bytes(range(32))


def test_the_same_key_gives_the_same_pseudonyms_and_another_key_others() -> None:
    a, b, other = Anonymizer(KEY, hosts=["gpu-lab-3"]), Anonymizer(KEY, hosts=["gpu-lab-3"]), Anonymizer(b"x" * 32)
    text = "ssh alice@gpu-lab-3 from 192.168.1.20: /home/alice/venv, GPU-8d0ff531-a2cd-2527-7669-e66277d6bc28"
    assert a.text(text) == b.text(text)
    assert a.text(text) != other.text(text)
    assert a.host("gpu-lab-3") == b.host("gpu-lab-3") and a.host("gpu-lab-3").startswith("host-")


def test_identifying_items_go_and_versions_stay() -> None:
    anon = Anonymizer(KEY, hosts=["DESKTOP-KFNTTB2"], users=["ktos"])
    text = ("ktos@DESKTOP-KFNTTB2:/mnt/c/Users/admin$ cd /home/ktos/proj\n"
            "Linux version 5.15.153.1-microsoft-standard-WSL2, VBIOS 94.06.19.00.4a, driver 31.0.15.2686\n"
            "IPv4 address for eth0: 172.28.30.162, gateway fe80::215:5dff:fe3a:1, MAC 00:15:5d:3a:01:ff\n"
            "GPU UUID : GPU-631d8576-d68e-40c9-f6a5-64074d5903e3, MIG-a1b2c3d4-1111-2222-3333-444455556666\n"
            "Serial Number : 1654024199050, Bus Id : 00000000:01:00.0, at 13:18:48, loopback 127.0.0.1")
    out = anon.text(text)
    for gone in ("ktos", "DESKTOP-KFNTTB2", "admin", "172.28.30.162", "fe80::215:5dff:fe3a:1", "00:15:5d:3a:01:ff",
                 "631d8576", "a1b2c3d4-1111", "1654024199050"):
        assert gone not in out, gone
    for kept in ("5.15.153.1-microsoft-standard-WSL2", "94.06.19.00.4a", "31.0.15.2686", "00000000:01:00.0",
                 "13:18:48", "127.0.0.1", "/mnt/c/Users/", "/home/"):
        assert kept in out, kept
    assert "GPU-" in out and "MIG-" in out  # still shaped like UUIDs: CUDA_VISIBLE_DEVICES checks read them


def test_a_report_keeps_its_verdicts_and_loses_its_identity() -> None:
    host, nvml = snapshot.replay(snapshot.load(CORPUS / "corpus" / "wsl-cpu-torch-wheel.json"))
    env = collect(host=host, nvml=nvml, runtime=True)
    report = model.Report("0", "2026-01-01T00:00:00Z", "wsl-cpu-torch", "check", env, evaluate(env))
    anon = Anonymizer(KEY, hosts=[report.host]).report(report)
    text = model.dumps(anon)
    assert "lkyu" not in text and "wsl-cpu-torch" not in text
    assert [(c.id, c.status) for c in anon.checks] == [(c.id, c.status) for c in report.checks]
    assert model.loads(text).host == anon.host


def test_an_anonymized_snapshot_still_replays_to_the_same_verdicts() -> None:
    path = CORPUS / "corpus" / "wsl-cpu-torch-wheel.json"
    snap = snapshot.load(path)
    anon = anonymize_snapshot(snap, Anonymizer(KEY))
    assert "lkyu" not in snapshot.dumps(anon) and anon.meta["anonymized"] is True
    assert anon.meta["sources"] == snap.meta["sources"]

    def statuses(s: snapshot.Snapshot) -> list[tuple[str, str]]:
        host, nvml = snapshot.replay(s)
        return [(c.id, c.status) for c in evaluate(collect(host=host, nvml=nvml, runtime=True))]

    assert statuses(anon) == statuses(snap)


def test_the_key_is_made_once_private_to_the_user(tmp_path: Path) -> None:
    path = key_path({"XDG_CONFIG_HOME": str(tmp_path), "HOME": "/nonexistent"})
    assert path == tmp_path / "envcheck" / "anonymize.key"
    first = load_key(path)
    assert load_key(path) == first and len(first) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_check_anonymize_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    args = [sys.executable, "-m", "envcheck", "check", "--anonymize", "--format", "json", "--replay",
            str(CORPUS / "corpus" / "wsl-cpu-torch-wheel.json")]
    runs = [subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path) for _ in range(2)]
    reports = [json.loads(r.stdout) for r in runs]
    assert reports[0]["host"] == reports[1]["host"] and reports[0]["host"].startswith("host-")
    assert "lkyu" not in runs[0].stdout
    assert (tmp_path / "config" / "envcheck" / "anonymize.key").exists()


@pytest.mark.parametrize("text", ["", "nothing to hide here: CUDA 12.8, driver 570.124.06"])
def test_harmless_text_is_unchanged(text: str) -> None:
    assert Anonymizer(KEY).text(text) == text


@pytest.mark.parametrize("command", ["run", "check", "snapshot", "bench"])
def test_an_unusable_key_is_one_line_before_any_work(tmp_path: Path, monkeypatch, capsys, command: str) -> None:
    """A key file that is not a key stops --anonymize before probing or benchmarking (a finished run
    would otherwise be lost to the error), and the file is left as it was."""
    from envcheck import cli
    from envcheck.commands import check as check_cmd
    from envcheck.commands import run as run_cmd

    key = tmp_path / "config" / "envcheck" / "anonymize.key"
    key.parent.mkdir(parents=True)
    key.write_text("not-hex\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)

    def no_work(*a, **kw):
        raise AssertionError("work started before the key was checked")

    monkeypatch.setattr(run_cmd, "collaborators", no_work)
    monkeypatch.setattr(check_cmd, "seams", no_work)
    monkeypatch.setattr(snapshot, "capture", no_work)
    from envcheck.userbench import discover

    monkeypatch.setattr(discover, "discover", no_work)  # bench: reading the user's ops is work too
    argv = {"run": ["run", "--quick", "--out-dir", str(tmp_path / "r")], "check": ["check"],
            "snapshot": ["snapshot", "--out-dir", str(tmp_path / "r")],
            "bench": ["bench", str(ROOT / "examples" / "softmax_wsum.py"), "--out-dir", str(tmp_path / "r")]}
    rc = cli.main([*argv[command], "--anonymize"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "anonymisation key" in err and "Traceback" not in err
    assert key.read_text() == "not-hex\n"
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
