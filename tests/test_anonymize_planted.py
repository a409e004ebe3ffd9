"""``--anonymize`` with identifiers planted in every place envcheck records them (issue 36, item 15): the
host (fully qualified, short and upper-case), the user (in paths and inside file names), IPv4 addresses
inside file names, in ranges and in EC2 host names. None may survive anywhere, in any case."""

from __future__ import annotations

import dataclasses
import json

import factories
import pytest

from envcheck import model
from envcheck.anonymize import Anonymizer, anonymize_snapshot
from envcheck.model import Environment, known

KEY = bytes(range(32))
FQDN, SHORT, USER = "zorblax7.cluster.example.org", "zorblax7", "qwertina"
ADDRS = ("10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6")
PLANTED = (FQDN, SHORT, USER, *ADDRS, "10-1-2-3")

LINES = [
    f"{SHORT}:4123:4123 [0] NCCL INFO Bootstrap : Using eth0:10.1.2.4<0>",
    f"{SHORT.upper()}: link down",
    "logs in /var/log/envcheck/run_10.1.2.4_x.log and nccl_10.1.2.4_rank0, nccl_10.1.2.4.log",
    "hosts 10.1.2.5-10.1.2.6 answered",
    "peer ip-10-1-2-3.ec2.internal (IP-10-1-2-3) joined",
    f"kernel /home/{USER}/kernels/{USER}_matmul.py and /scratch/{USER}-tmp/{USER.upper()}_x.py",
    f"ssh {USER}@{FQDN}",
]
KEPT = ["kernel 5.15.153.1-microsoft-standard-WSL2", "VBIOS 94.06.19.00.4a", "driver 570.124.06",
        "linux-5.1.2.3", "NCCL 2.21.5"]


def anonymizer() -> Anonymizer:
    return Anonymizer(KEY, hosts=[FQDN], users=[USER], homes=[f"/home/{USER}"])


def left(text: str) -> list[str]:
    return [p for p in PLANTED if p.lower() in text.lower()]


@pytest.mark.parametrize("line", LINES)
def test_no_planted_identifier_survives_in_text(line: str) -> None:
    assert left(anonymizer().text(line)) == []


@pytest.mark.parametrize("text", KEPT)
def test_versions_that_look_like_addresses_stay(text: str) -> None:
    assert anonymizer().text(text) == text


def test_a_range_and_a_file_name_keep_their_shape_and_the_same_address_its_pseudonym() -> None:
    a = anonymizer()
    ip = a.pseudonym("ip", "10.1.2.4")
    assert a.text("run_10.1.2.4_x.log") == f"run_{ip}_x.log"
    assert a.text("ip-10-1-2-4") == ip  # the EC2 name and the address are one machine
    assert a.text("10.1.2.5-10.1.2.6") == f"{a.pseudonym('ip', '10.1.2.5')}-{a.pseudonym('ip', '10.1.2.6')}"


def _planted_environment() -> Environment:
    env = factories.environment()
    sections = dict(env.sections)
    sections["system"] = {**sections.get("system", {}), "hostname": known(FQDN),
                          "disk_path": known(f"/home/{USER}/run_10.1.2.4_x"),
                          "python_executable": known(f"/scratch/{USER}-venv/bin/python")}
    sections["env"] = {**sections.get("env", {}), "variables": known({
        "PWD": f"/home/{USER}/{SHORT.upper()}_work", "NCCL_DEBUG_FILE": "/tmp/nccl_10.1.2.4_rank0",
        "SLURM_NODELIST": "10.1.2.5-10.1.2.6", "MASTER_ADDR": "ip-10-1-2-3.ec2.internal"})}
    return dataclasses.replace(env, sections=sections)


def test_a_report_with_identifiers_planted_everywhere_keeps_none() -> None:
    report = dataclasses.replace(factories.report(), host=FQDN, environment=_planted_environment())
    report = dataclasses.replace(report, checks=tuple(
        dataclasses.replace(c, finding=LINES[i % len(LINES)], details="\n".join(LINES)) for i, c in enumerate(report.checks)))
    text = model.dumps(anonymizer().report(report))
    assert left(text) == [], left(text)


def test_a_snapshot_with_identifiers_planted_everywhere_keeps_none() -> None:
    from envcheck import snapshot

    snap = snapshot.Snapshot(
        meta={"host": FQDN, "captured": "2026-11-28T00:00:00Z"},
        host={"cwd": f"/home/{USER}/{SHORT}_runs", "environ": {"USER": USER, "HOME": f"/home/{USER}",
                                                               "HOSTNAME": SHORT.upper()},
              "files": {f"/home/{USER}/run_10.1.2.4_x.log": "\n".join(LINES),
                        f"/tmp/{USER}_kernels/{USER}_matmul.py": "# ip-10-1-2-3"}},
        nvml={})
    out = anonymize_snapshot(snap, Anonymizer(KEY))
    text = json.dumps({"meta": out.meta, "host": out.host, "nvml": out.nvml})
    assert left(text) == [], left(text)
