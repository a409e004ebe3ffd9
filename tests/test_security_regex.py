"""Every regular expression over outside text is linear (issue 46, item 9).

Each one gets a megabyte shaped to make a backtracking engine rescan (a long run of what its first
quantifier takes, repeated starts that fail late, blanks before the end of a line). Each runs in a forked
process whose CPU time is limited (``RLIMIT_CPU``): ten seconds of CPU, not of a busy machine's wall
clock; a quadratic pattern takes hours at this size and is killed at the limit.
"""

from __future__ import annotations

import os
import resource
import signal
import types
from collections.abc import Callable
from typing import Any

import pytest

from envcheck import anonymize, redact, reportname
from envcheck.analysis import burn, fleet, peaks
from envcheck.checks import cuda_versions, torch
from envcheck.node import fleet_rank as node_fleet
from envcheck.node import nccl_log, nccl_tests
from envcheck.outside_json import read_json
from envcheck.outside_text import encodable, json_text, visible
from envcheck.probes import cuda, platform, topology, torch_probe, triton_probe, wsl, xid
from envcheck.render import chart_draw, documents, escape, junit
from envcheck.render.terminal import console

MB = 1 << 20
CPU_LIMIT_S = 10
NO_HOST = types.SimpleNamespace(environ={}, exists=lambda path: False)
CHART = types.SimpleNamespace(title="t", description="d")


def run(text: str, times: int = 1) -> str:
    """``text`` repeated to a megabyte."""
    return (text * (MB // len(text) + 1))[:MB * times]


CASES: list[tuple[str, Callable[[Any], object], Any]] = [
    ("wsl: a megabyte of digits", lambda s: wsl.wsl_version(s, "", NO_HOST), "1" * MB),
    ("wsl: a release of dotted numbers", lambda s: wsl.wsl_version("", s, NO_HOST), run("1.")),
    ("wsl: near misses", lambda s: wsl.wsl_version(s, s, NO_HOST), run("11.22.33-44-")),
    ("xid: starts without their end", xid.parse_xids, run("NVRM: Xid (PCI:0000:3b:00")),
    ("xid: kmsg record", xid.parse_xids, "1,2,3," + "x" * MB),
    ("nvidia-smi nvlink: blanks inside a link line", topology.parse_nvlink_speeds,
     "GPU 0:\n Link 0: a" + " " * MB + "x"),
    ("nvidia-smi topo", topology.parse_topo_matrix, run("\x1b[1;1;1") + "\nGPU0\tGPU1"),
    ("ldconfig: blanks inside an entry", lambda s: cuda.parse_ldconfig(s, "x86_64"),
     "libcuda.so.1 (libc6,x86-64) => a" + " " * MB + "x"),
    ("ldconfig: an entry without its end", lambda s: cuda.parse_ldconfig(s, "x86_64"), "a (" + "b" * MB),
    ("nvcc release", cuda.parse_nvcc_version, run("release ") + "1"),
    ("ptxas release", triton_probe.parse_ptxas_version, "release 1.1, V" + run("1.")),
    ("slurm host list: opened brackets", node_fleet.expand_nodelist, run("a[")),
    ("PCI bus id: a run of hex digits", burn._pci, "a" * MB),
    ("markdown heading: blanks inside", documents.markdown_toc, "## a" + " " * MB + "b\n"),
    ("heading slug: opened brackets", lambda s: documents.slug(s, {}), run("[a")),
    ("heading slug: links without their end", lambda s: documents.slug(s, {}), run("[a](")),
    ("terminal: blanks before the end", lambda s: console._TRAILING.sub(r"\1", s), " " * MB + "x\n"),
    ("svg tidy: blanks", lambda s: chart_draw._tidy(s, CHART), '<svg width="1pt" height="1pt">' + " " * MB + "x"),
    ("nccl-tests", nccl_tests.parse, "# Collective test starting: all_reduce_perf\n" + run("1 ") + "x"),
    ("nccl-tests version", nccl_tests.version, run("# nccl-tests version ")),
    ("NCCL log", lambda s: nccl_log.parse_choices(s, 0), "h:1:1 [0] NCCL INFO AllReduce: opCount " + run("x comm ")),
    ("NCCL version", nccl_log.nccl_version, run("NCCL INFO NCCL version 1")),
    ("arch list", lambda s: torch.arch_support((9, 0), [s]), "sm_" + "1" * MB + "x"),
    ("CUDA version", cuda_versions.parse, "cu" + "1" * MB + "x"),
    ("requirement", platform._REQUIREMENT.match, "nvidia-x" + " " * MB + "!"),
    ("kernel command line", platform._IOMMU_WORD.match, "iommu=" + "x" * MB + " "),
    ("torch version.py", lambda s: torch_probe.version_py_value(s, "cuda"), run("cuda: ") + "\n"),
    ("triton pin", lambda s: torch_probe.triton_pin((s,)), "triton" + " " * MB + "x"),
    ("URL credentials", redact.redact_urls, run("a://") + "b" * 1000),
    ("token shapes", redact.redact_urls, run("ghp_") + "_" * 1000),
    ("anonymized text", anonymize.Anonymizer(b"k", ["host"], ["alice"]).text, run("1.1.1.1.::::a:") + "/home/" + "x" * MB),
    ("anonymized serial", anonymize.Anonymizer(b"k").text, run("Serial Number :") + "1"),
    ("GPU name", lambda s: [spec.matches(s) for spec in peaks.SPECS], run("a100 ")),
    ("fleet metric", fleet.describe_metric, "node." + "a" * MB + ".busbw_gbps@x"),
    ("report name", lambda s: reportname.slug(s, "x"), run("-a")),
    ("visible text", visible, run("\u202e\x1b")),
    ("encodable text", encodable, run("\ud800a")),
    ("JSON text", lambda s: read_json(s, ValueError, "report"), '"' + "\\\\ud8" * (MB // 5) + '"'),
    ("Markdown text", escape.md_text, run("[*`")),
    ("Markdown line start", escape.md_lead, " " * MB + "x"),
    ("Markdown code", escape.md_code, run("`a")),
    ("JSON for users", json_text, run("\u2028a")),
    ("HTML command", escape.html_command, run("a \u4e00")),
    ("JUnit text", junit._text, run("\ufffea")),
]


def within_cpu_limit(apply: Callable[[Any], object], text: Any) -> str | None:
    """None when ``apply(text)`` returned within ``CPU_LIMIT_S`` of CPU, else what happened."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S + 5))
            apply(text)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
        return f"more than {CPU_LIMIT_S} s of CPU"
    return None if os.waitstatus_to_exitcode(status) == 0 else "failed"


@pytest.mark.parametrize(("name", "apply", "text"), CASES, ids=[c[0] for c in CASES])
def test_a_megabyte_of_hostile_text_costs_seconds_at_most(name: str, apply: Callable[[Any], object], text: Any) -> None:
    assert within_cpu_limit(apply, text) is None, name


def test_the_wsl1_kernel_release_of_100_kb() -> None:
    """The issue's case: a replayed snapshot's kernel release of 100 kB took 55 s."""
    assert within_cpu_limit(lambda s: wsl.wsl_version(s, "", NO_HOST), "4" * 100_000) is None
    assert wsl.wsl_version("4.4.0-19041-Microsoft", "", NO_HOST) == 1
