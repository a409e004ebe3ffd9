"""``--anonymize`` replaces known user names and home folders wherever they are, with care for short names."""

from __future__ import annotations

import json
from pathlib import Path

from envcheck import cli
from envcheck.anonymize import Anonymizer, homes_in, users_in

KEY = b"k" * 32
HPC = {"HOME": "/scratch/u/bobhpc42", "USER": "bobhpc42"}


def anon(environ, hosts=()) -> Anonymizer:
    return Anonymizer(KEY, hosts=hosts, users=users_in(environ), homes=homes_in(environ))


def test_a_user_name_outside_home_and_users_goes_everywhere() -> None:
    text = "cwd=/scratch/u/bobhpc42/proj PYTHONPATH=/opt/bobhpc42/lib:/scratch/u/bobhpc42/src owner bobhpc42"
    out = anon(HPC).text(text)
    assert "bobhpc42" not in out and "/scratch/u/user-" in out and "/opt/user-" in out


def test_home_is_found_from_home_alone() -> None:
    assert "bobhpc42" not in anon({"HOME": "/scratch/u/bobhpc42"}).text("/scratch/u/bobhpc42/x")


def test_a_short_name_is_replaced_only_where_it_can_only_be_a_name() -> None:
    a = anon({"HOME": "/data/a", "USER": "a"})
    out = a.text("a b c: a file in /data/a/project, mail a@box")
    assert out.startswith("a b c: a file in /data/user-") and "user-" in out.split("mail ")[1]
    common = anon({"HOME": "/srv/test", "USER": "test"}).text("test passed in /srv/test/x")
    assert common.startswith("test passed in /srv/user-")


def test_a_user_name_inside_a_longer_word_stays() -> None:
    assert anon(HPC).text("xbobhpc42y") == "xbobhpc42y"


def test_check_anonymize_of_a_replay_loses_the_snapshot_users_name(tmp_path, capsys, monkeypatch) -> None:
    corpus = Path(__file__).parent / "fixtures" / "snapshots" / "corpus" / "wsl-4x-rtx4090-torch25.json"
    data = json.loads(corpus.read_text())
    data["host"]["environ"].update({**HPC, "PYTHONPATH": "/scratch/u/bobhpc42/lib"})
    data["host"]["cwd"] = "/scratch/u/bobhpc42/proj"
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps(data))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    cli.main(["check", "--replay", str(snap), "--anonymize", "--format", "json"])
    out = capsys.readouterr().out
    assert "bobhpc42" not in out and '"anonymized": true' in out


def test_a_home_outside_home_such_as_root_s_is_replaced_too(monkeypatch) -> None:
    """Issue 38 item 12: ``snapshot --anonymize`` of root's run kept nine /root/.pyenv/... paths."""
    text = "python=/root/.pyenv/versions/3.11.7/bin/python3 cwd=/root rootfs=/rootfs"
    out = anon({"HOME": "/root", "USER": "root"}).text(text)
    assert "/root/" not in out and "=/root " not in out and "/user-" in out
    assert "rootfs=/rootfs" in out  # another folder that only starts alike stays

    import envcheck.anonymize as anonymize

    monkeypatch.delenv("HOME", raising=False)  # the password database still names the home
    monkeypatch.setattr(anonymize, "own_home", lambda: ["/srv/svc-runner"])
    mine = anonymize.for_this_machine("box", KEY)
    assert "svc-runner" not in mine.text("/srv/svc-runner/.cache/envcheck")
