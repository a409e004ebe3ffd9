"""Every command run in zh-CN says nothing in English of envcheck's own (issue 51, "zh-CN complete").

Each command runs end to end through ``cli.main([..., "--lang", "zh-CN"])`` on this machine's CPU, on replayed
snapshots and on committed reports, and everything it prints (stdout and stderr, its children's included) goes
through test_zh_complete's detector: what may stay Latin is what the machine said (the strings of every report
and snapshot the command read or wrote, paths, file names), what the Chinese catalogue keeps verbatim (commands,
names, units) and its short list. Progress lines, notes, one-line errors and the reports' views are all held.
The same commands in English must be found English by the same detector: the test can fail.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_zh_complete import English, _machine_strings

from envcheck import cli, snapshot
from envcheck.model import to_dict
from envcheck.ops import OP_GROUPS
from envcheck.probes.collect import collect

pytestmark = pytest.mark.usefixtures("charts_not_drawn")
ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "evidence"
SNAPSHOTS = ROOT / "tests" / "fixtures" / "snapshots" / "corpus"
RUN_A, RUN_B = EVIDENCE / "2026-11-22_0104Z_vm_h200.json.gz", EVIDENCE / "2026-11-22_2139Z_vm_h200.json.gz"
H100 = EVIDENCE / "2026-11-22_0057Z_vm_h100-80gb-hbm3.json.gz"
FLEET = EVIDENCE / "2026-11-22_2149Z_fleet-2x_vm.json.gz"
A_DIFF = EVIDENCE / "2026-11-22_diff_h200_back_to_back.json.gz"
USER_FILE = ROOT / "tests" / "userbench_files" / "hazards.py"
# What --format and --ops take (named in a refusal), and the health line's verdict, which node-problem-detector reads
# as is.
NAMES = {"json", "md", "html", "text", "junit", "prometheus", "health", "png", "OK", *OP_GROUPS}


def _json(path: Path) -> object:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def _replayed_strings(path: Path) -> set[str]:
    """A snapshot holds the files it read whole (os-release, cpuinfo); what a check says of them is the
    environment they give: its strings are the machine's (this machine's OS and CPU name, whatever they are)."""
    data = _json(path)
    if not isinstance(data, dict) or data.get("format") != "envcheck-snapshot":
        return set()
    host, nvml = snapshot.replay(snapshot.load(path))
    return _machine_strings(to_dict(collect(host=host, nvml=nvml, runtime=True, timeout=60)), set())


class Session:
    """Commands run in one folder (the reports folder too) and what each printed, with the machine's strings it may
    say back: what the user typed, and every report and snapshot the command read (named, or in a folder named) or
    wrote, with the names of the files."""

    def __init__(self, tmp: Path, capfd: pytest.CaptureFixture[str]) -> None:
        self.tmp, self.capfd = tmp, capfd
        self.printed: list[tuple[str, str, set[str]]] = []
        self.said: set[str] = set()  # the strings of JSON a command printed (``--format json``)

    def _files(self) -> set[Path]:
        return set(self.tmp.rglob("*"))

    def run(self, *argv: str, lang: str = "zh-CN", status: tuple[int, ...] = (0, 1)) -> str:
        before = self._files()
        self.capfd.readouterr()
        rc = cli.main([*argv, "--lang", lang])
        out, err = self.capfd.readouterr()
        assert rc in status, (argv, rc, out, err)
        named = [Path(a) for a in argv if "/" in a]
        touched = self._files() - before | {q for p in named for q in ([*p.iterdir()] if p.is_dir() else [p])}
        if out.startswith("{"):  # data, not sentences: its strings are the machine's to say again
            _machine_strings(json.loads(out), self.said)
            out = ""
        machine = {str(self.tmp), self.tmp.name, *NAMES, *argv, *self.said}
        for p in touched:
            machine |= {str(p), p.name, p.stem}
            if p.is_file() and p.name.endswith((".json", ".json.gz")):
                _machine_strings(_json(p), machine)
                machine |= _replayed_strings(p)
        self.printed.append((" ".join(argv), out + err, machine))
        return out + err

    def english(self) -> dict[str, list[str]]:
        """Latin words of ours in what each command printed."""
        found = {argv: English(machine).words(text) for argv, text, machine in self.printed}
        return {argv: w for argv, w in found.items() if w}


@pytest.fixture
def session(tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Session]:
    monkeypatch.setenv("ENVCHECK_REPORTS_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(tmp_path)
    yield Session(tmp_path, capfd)


def _reports_and_refusals(s: Session, lang: str = "zh-CN") -> None:
    """The commands that read reports and snapshots, and the one-line refusals of bad input."""
    for snap in sorted(SNAPSHOTS.glob("*.json"))[::3]:
        s.run("check", "--replay", str(snap), "--out", str(s.tmp / f"{snap.stem}.json"), lang=lang)
    s.run("probe", "--replay", str(SNAPSHOTS / "wsl-nvml-segfault.json"), "--format", "json", lang=lang)
    s.run("probe", "--replay", str(SNAPSHOTS / "wsl-nvml-segfault.json"), lang=lang)
    s.run("diff", str(H100), str(RUN_A), "--fail-on-regression", "5", lang=lang, status=(0, 1, 3))
    s.run("diff", str(RUN_A), str(RUN_B), "--format", "md", "--out", str(s.tmp / "d.md"), lang=lang)
    s.run("diff", str(FLEET), str(FLEET), lang=lang)
    folder = s.tmp / "history"
    folder.mkdir()
    for p in (RUN_A, RUN_B, A_DIFF):
        shutil.copy(p, folder)
    s.run("history", str(folder), lang=lang)
    s.run("render", str(RUN_A), "--out", str(s.tmp / "r"), "--format", "md", lang=lang)
    s.run("export", str(RUN_A), "--format", "health", lang=lang)
    s.run("export", str(FLEET), "--format", "junit", "--out", str(s.tmp / "j.xml"), lang=lang)
    refusals = [
        ("render", str(RUN_A), "--out", str(s.tmp / "r"), "--format", "md"),  # already there
        ("export", str(FLEET), "--format", "junit", "--out", str(s.tmp / "j.xml")),  # never overwritten
        ("export", str(RUN_A), "--format", "prometheus", "--out", str(s.tmp)),  # a folder
        ("diff", str(RUN_A)),
        ("diff", str(RUN_A), str(SNAPSHOTS / "wsl-nvml-segfault.json")),  # not a report
        ("diff", str(RUN_A), str(s.tmp / "missing.json")),
        ("diff", str(RUN_A), str(RUN_B), "--gpu", "3"),
        ("history", str(s.tmp / "r")),
        ("check", "--replay", str(RUN_A)),  # a report is not a snapshot
        ("check", "--slurm-drain"),
        ("run", "--sizes", "12q"),
        ("run", "--ops", "nope"),
        ("run", "--dtypes", "fp8"),
        ("run", "--format", "pdf"),
        ("run", "--repeat", "2", "--gpus", "0"),
        ("burn", "--cpu", "--minutes", "9999"),
        ("burn", "--cpu", "--control-gpu", "0"),
        ("bench", str(s.tmp / "nothing.py")),
        ("fleet",),  # no launcher
        ("fleet", "--rule", "a:b"),
    ]
    for argv in refusals:
        s.run(*argv, lang=lang, status=(2,))


@pytest.mark.slow  # dozens of CLI runs: the full suite runs it
def test_reports_snapshots_and_refusals_say_nothing_in_english(session: Session) -> None:
    _reports_and_refusals(session)
    assert len(session.printed) >= 30
    found = session.english()
    assert not found, "\n".join(f"{k}: {v}" for k, v in found.items())


@pytest.mark.slow  # dozens of CLI runs: the full suite runs it
def test_the_same_commands_in_english_are_found_english(session: Session) -> None:
    """The detector on the same commands in English: it finds our words in most of them (never vacuous)."""
    _reports_and_refusals(session, "en")
    assert len(session.english()) >= 20


@pytest.mark.slow  # a run, a burn and a user's bench measured on the CPU: one test each, so they run side by side
@pytest.mark.parametrize("what", ["run", "burn", "bench", "snapshot"])
def test_measuring_commands_on_the_cpu_say_nothing_in_english(session: Session, what: str) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    snap = str(session.tmp / "snap.json")
    commands = {"run": [("run", "--quick", "--interpret", "--ops", "vector_add", "--format", "json,md")],
                "burn": [("burn", "--cpu", "--minutes", "0.02", "--format", "json")],
                "bench": [("bench", str(USER_FILE), "--quick", "--format", "json", "--case-timeout", "15")],
                "snapshot": [("snapshot", "--out", snap), ("check", "--replay", snap)]}[what]
    for argv in commands:
        session.run(*argv)
    found = session.english()
    assert not found, "\n".join(f"{k}: {v}" for k, v in found.items())

