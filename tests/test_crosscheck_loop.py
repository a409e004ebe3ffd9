"""The plain ``torch.distributed`` loop of ``run --crosscheck`` in the sweep's own torchrun workers, on gloo on the
CPU: every rank times every (op, size) of the plan after the sweep, the parent gathers the loops per op and size,
and the sweep's own results are as they are without it. The torchrun test is slow: it starts two Python processes that
import torch."""

from __future__ import annotations

import pytest

from envcheck.analysis import crosscheck as ax
from envcheck.crosscheck.tools import read_loops
from envcheck.node import crosscheck_loop
from envcheck.node.collective_run import Placement, SweepPlan, run_sweep
from envcheck.node.launch import SubprocessLauncher


@pytest.mark.slow
def test_the_loop_runs_in_the_sweeps_ranks_at_every_size(tmp_path):
    plan = SweepPlan(ops=("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"),
                     sizes=(1 << 12, 1 << 16), warmup=1, iters=2, device="cpu", narrow=False, crosscheck_loop=True)
    c = run_sweep(plan, Placement(2), tmp_path, SubprocessLauncher(), 240)
    assert c.error is None and [r.status for r in c.ranks] == ["ok", "ok"]
    assert all(res.wrong == 0 for res in c.results)
    got = read_loops(tmp_path)
    assert [(x.op, x.size_bytes) for x in got] == [(r.op, r.size_bytes) for r in c.results]
    for x in got:
        assert x.error is None and x.skipped is None and x.ranks == (0, 1) and x.calls == crosscheck_loop.CALLS
        assert [t.rank for t in x.timings] == [0, 1]
        assert all(t.timing.method == "host_clock" and t.timing.n == crosscheck_loop.LOOPS for t in x.timings)
        assert ax.loop_time_us(x) is not None and ax.loop_time_us(x) > 0



def test_the_plan_asks_for_the_loop_only_with_the_flag():
    assert SweepPlan().to_json()["crosscheck_loop"] is False
    assert SweepPlan(crosscheck_loop=True).to_json()["crosscheck_loop"] is True
