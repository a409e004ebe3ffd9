"""Nothing leaked, nothing left running, nothing misdiagnosed: secrets a probe child prints, Ctrl-C
while children run, non-finite timeouts, and a torch shadowed on PYTHONPATH."""

from __future__ import annotations

import _thread
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envcheck.probes.collect import collect
from envcheck.probes.host import Host

ROOT = Path(__file__).resolve().parents[1]

SECRETS = {
    "HF_TOKEN": "hf_live_0123456789abcdefghijABCDEFGHIJ",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "DATABASE_URL": "postgres://dbuser:Db-Passw0rd-42@db.internal.example:5432/app",
}
LEAKS = ("hf_live_0123456789abcdefghijABCDEFGHIJ", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Db-Passw0rd-42",
         "s3cr3t-Pa55word")

# A torch whose import prints secrets from its environment and dies with a credentialed URL,
# as a broken install behind a private index does.
LEAKY_TORCH = '''
import os, sys
sys.stderr.write("debug: HF_TOKEN=" + os.environ.get("HF_TOKEN", "") + "\\n")
sys.stderr.write("debug: AWS_SECRET_ACCESS_KEY=" + os.environ.get("AWS_SECRET_ACCESS_KEY", "") + "\\n")
print("connecting to", os.environ.get("DATABASE_URL", ""))
raise RuntimeError("cannot fetch https://alice:s3cr3t-Pa55word@pypi.internal.example/simple/torch-extras/")
'''

# A torch source checkout on PYTHONPATH: imports as torch, fails like one that was never built.
SHADOW_TORCH = '''
raise ModuleNotFoundError("No module named 'torch._C'")
'''


def envcheck(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)


def python_with(folder: Path, packages: dict[str, str]) -> str:
    """A Python (a venv at ``folder``) whose own site-packages holds ``packages`` (name -> ``__init__.py``),
    ahead of this one's: what a broken install looks like from inside, the only place a child looks."""
    import site
    import sysconfig
    import venv

    venv.create(folder, with_pip=False, symlinks=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    outer = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    (Path(purelib) / "outer.pth").write_text("\n".join(outer) + "\n", encoding="utf-8")
    for name, code in packages.items():
        (Path(purelib) / name).mkdir()
        (Path(purelib) / name / "__init__.py").write_text(code, encoding="utf-8")
    return str(python)


def test_secrets_printed_or_raised_by_the_torch_child_never_reach_the_report(tmp_path: Path) -> None:
    python = python_with(tmp_path / "py", {"torch": LEAKY_TORCH})
    out = tmp_path / "report.json"
    env = {**os.environ, **SECRETS, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([python, "-m", "envcheck", "check", "--format", "json", "--out", str(out), "--timeout", "60"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    report = json.loads(text)
    error = report["environment"]["sections"]["torch_runtime"]["error"]["value"]
    assert error.startswith("RuntimeError: cannot fetch https://<redacted>@pypi.internal.example/")
    tail = report["environment"]["sections"]["torch_runtime"]["output_tail"]["value"]
    # The secrets never reached the child: its environment is an allow-list.
    assert "debug: HF_TOKEN=\n" in tail and "connecting to" in tail and "db.internal" not in tail
    for leak in LEAKS:
        assert leak not in text, leak
        assert leak not in res.stdout


def test_ctrl_c_during_probing_kills_the_children(tmp_path: Path) -> None:
    """The runtime probes wait in threads; Ctrl-C reaches only the main thread. Their children run
    in sessions of their own, so before envcheck killed them on the way out they outlived it."""
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "slow_python"
    script.write_text(f"#!{sys.executable}\nimport os, time\n"
                      f"open({str(pid_file)!r}, 'a').write(str(os.getpid()) + '\\n')\ntime.sleep(120)\n",
                      encoding="utf-8")
    script.chmod(0o755)

    class SlowPython(Host):
        def __init__(self) -> None:
            super().__init__()
            self.python_executable = str(script)

    class NoNvml:
        def init(self) -> str:
            return "NVML Shared Library Not Found"

        def shutdown(self) -> None:
            pass

    interrupted: list[float] = []

    def interrupt_when_started() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if pid_file.exists() and len(pid_file.read_text().split()) >= 3:
                break
            time.sleep(0.05)
        interrupted.append(time.monotonic())
        _thread.interrupt_main()

    # Ctrl-C as a terminal delivers it: under a parent that ignores SIGINT (a job started in the background, a
    # benchmark harness) interrupt_main would do nothing, and the test would wait out the children's 100 s.
    old_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=interrupt_when_started, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            collect(host=SlowPython(), nvml=NoNvml(), runtime=True, timeout=100)
    finally:
        signal.signal(signal.SIGINT, old_handler)
    # Ctrl-C is answered at once, not when the children's 100 s timeout has killed them.
    assert interrupted and time.monotonic() - interrupted[0] < 10
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 3  # the torch, the Triton and the links child
    deadline = time.monotonic() + 5
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in pids if _running(p)]
        time.sleep(0.05)
    assert not alive, f"probe children still running after Ctrl-C: {alive}"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


SLOW_TORCH = "import os, time\nopen({pids!r}, 'a').write(str(os.getpid()) + '\\n')\ntime.sleep(120)\n"


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_no_probe_child_outlives_envcheck_check_ended_by_a_signal(tmp_path: Path, sig: int) -> None:
    """A closed ssh session (SIGHUP) or a scheduler's time limit (SIGTERM) while the runtime probes import a
    torch that takes minutes: before, envcheck died at once and its children ran on, unowned."""
    pids = tmp_path / "pids"
    python = python_with(tmp_path / "py", {"torch": SLOW_TORCH.format(pids=str(pids))})
    proc = subprocess.Popen([python, "-m", "envcheck", "check", "--timeout", "300", "--out", str(tmp_path / "r.json")],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(pids.read_text().split() if pids.exists() else ()) < 2:
            time.sleep(0.1)
        children = [int(p) for p in pids.read_text().split()]  # the torch and the Triton probe's children
        assert len(children) == 2
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and err.strip().endswith("envcheck check: interrupted"), err[-2000:]
    deadline = time.monotonic() + 10
    while any(_running(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in children if _running(p)], "a probe child outlived envcheck"


def test_a_module_planted_where_envcheck_runs_is_never_imported_by_a_probe_child(tmp_path: Path, monkeypatch) -> None:
    """A json.py or torch.py in the folder the user runs envcheck from (a cloned repo, downloads), or on
    PYTHONPATH: before, the probe children ran ``python -c`` with that folder first on sys.path."""
    from envcheck.probes.link_counters import probe_links_isolated

    mark = tmp_path / "imported"
    for name in ("json.py", "torch.py", "pynvml.py"):
        (tmp_path / name).write_text(f"open({str(mark)!r}, 'a').write({name!r})\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    facts = probe_links_isolated(Host(), 60)
    assert facts and not mark.exists(), mark.read_text()


@pytest.mark.parametrize("value", ["inf", "nan", "1e400"])
@pytest.mark.parametrize("command", ["check", "snapshot"])
def test_non_finite_timeouts_are_refused(command: str, value: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = envcheck(command, "--timeout", value, env=env, cwd=tmp_path)
    assert res.returncode == 2, res.stdout[-500:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"envcheck {command}: error: argument --timeout:") and value in last
    assert res.stdout == "" and list(tmp_path.iterdir()) == []


def test_a_torch_shadowed_through_pythonpath_is_named_with_its_fix(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    shadow = tmp_path / "src" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(SHADOW_TORCH, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{shadow.parent}:{ROOT}"}
    res = envcheck("check", "--format", "json", "--timeout", "60", env=env, cwd=tmp_path)
    checks = {c["id"]: c for c in json.loads(res.stdout)["checks"]}
    location = checks["torch.location"]
    assert location["status"] == "fail"
    assert location["finding"].startswith(f"`import torch` loads {shadow}, not the installed ")
    assert location["fix"] == f"unset PYTHONPATH (or drop {shadow.parent} from it: export PYTHONPATH={ROOT})"
    # The probe imports the installed torch: a child of envcheck never reads PYTHONPATH.
    assert checks["torch.import"]["status"] == "pass"
