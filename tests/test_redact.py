"""One redaction at the host seam: every text a probe captures loses the environment's secrets."""

from __future__ import annotations

import sys

from envcheck.probes.host import Host
from envcheck.redact import REDACTED, Redactor
from tests.fakes import FakeHost

ENV = {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz012345", "DB_PASSWORD": "correct-horse-battery",
       "XDG_SESSION_ID": "3", "XDG_SESSION_CLASS": "user", "PATH": "/usr/bin"}


def test_secret_values_urls_and_token_shapes_go_wherever_they_appear() -> None:
    r = Redactor(ENV)
    text = ("login with hf_abcdefghijklmnopqrstuvwxyz012345 and correct-horse-battery at "
            "https://alice:pw123456@pypi.example/simple; stray ghp_0123456789abcdefghij0123456789AB")
    out = r.text(text)
    assert "hf_abcdef" not in out and "correct-horse" not in out and "pw123456" not in out and "ghp_0123" not in out
    assert out.count(REDACTED) == 4 and "https://<redacted>@pypi.example/simple" in out


def test_short_values_of_session_variables_do_not_erase_ordinary_words() -> None:
    # XDG_SESSION_ID=3 and XDG_SESSION_CLASS=user are "secret-named" but replacing every "3" or "user" would
    # destroy the text; values shorter than MIN_SECRET_LENGTH are left alone.
    assert Redactor(ENV).text("user 3 on /home/user") == "user 3 on /home/user"


def test_the_real_host_redacts_what_its_children_print(monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", ENV["HF_TOKEN"])
    # The child never gets the secret (its environment is an allow-list): it prints the value itself, as a tool
    # that read it from a file would, and the host still knows it from its own environment.
    res = Host().run([sys.executable, "-c", f"import sys; print({ENV['HF_TOKEN']!r}); "
                      "sys.stderr.write('https://u:p4ssw0rd@x.example\\n')"], timeout=30)
    assert res.stdout.strip() == REDACTED and res.stderr.strip() == "https://<redacted>@x.example"


def test_every_host_redacts_file_text_and_command_output() -> None:
    host = FakeHost(files={"/etc/pip.conf": "index-url = https://bob:s3cretpw@corp.example/simple\n"},
                    commands={"tool": (0, f"token {ENV['HF_TOKEN']}\n", "")}, environ=ENV)
    assert host.read_text("/etc/pip.conf") == "index-url = https://<redacted>@corp.example/simple\n"
    assert host.run(["tool"], timeout=5).stdout == f"token {REDACTED}\n"


def test_credentials_after_a_long_run_of_letters_still_go() -> None:
    # The scheme is looked for over at most 32 characters (unbounded, a worker's 8 MiB line of
    # letters took hours); credentials right after such a run are still found.
    r = Redactor({})
    assert r.text("a" * 100_000 + "https://alice:pw123456@host/x") == "a" * 100_000 + "https://<redacted>@host/x"
    assert r.text("git+https://alice:pw@host") == "git+https://<redacted>@host"
