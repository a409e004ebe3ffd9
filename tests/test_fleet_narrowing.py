"""Narrowing a slow collective by bisection: a fake measurement where one rank, one link or the
network between two nodes is slow; the same walk must find it and explain it afterwards."""

from __future__ import annotations

import itertools

import pytest

from envcheck.analysis.narrowing import NarrowStep, halves, narrowing_conclusion
from envcheck.node.collective_worker import run_narrowing

HOSTS = ("a",) * 4 + ("b",) * 4  # two nodes of four GPUs
WORLD = tuple(range(8))


def _measure(slow):
    calls = []

    def measure(group):
        calls.append(group)
        return 50.0 if slow(group) else 100.0

    return measure, calls


def test_halves_never_cut_a_node():
    assert halves(WORLD, HOSTS) == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert halves((4, 5, 6, 7), HOSTS) == ((4, 5), (6, 7))


@pytest.mark.parametrize("culprit", range(8))
def test_one_slow_rank_is_found(culprit):
    measure, calls = _measure(lambda g: culprit in g)
    steps = run_narrowing(measure, WORLD, HOSTS)
    c = narrowing_conclusion(steps, WORLD, HOSTS)
    assert (c.kind, c.ranks, c.hosts) == ("rank", (culprit,), (HOSTS[culprit],))
    assert len(calls) <= 7  # world, 2 halves, 2 quarters, 2 pairs with a reference: far fewer than all 28 pairs


def test_one_slow_link_is_found():
    measure, _ = _measure(lambda g: 2 in g and 3 in g)
    steps = run_narrowing(measure, WORLD, HOSTS)
    c = narrowing_conclusion(steps, WORLD, HOSTS)
    assert (c.kind, c.ranks) == ("link", (2, 3))


def test_slow_only_across_nodes_blames_the_network_between_them():
    measure, _ = _measure(lambda g: len({HOSTS[r] for r in g}) > 1)
    c = narrowing_conclusion(run_narrowing(measure, WORLD, HOSTS), WORLD, HOSTS)
    assert (c.kind, c.ranks, c.other, c.hosts) == ("between", (0, 1, 2, 3), (4, 5, 6, 7), ("a", "b"))


def test_a_whole_slow_node_is_named():
    measure, _ = _measure(lambda g: all(HOSTS[r] == "b" for r in g))
    c = narrowing_conclusion(run_narrowing(measure, WORLD, HOSTS), WORLD, HOSTS)
    assert (c.kind, c.ranks, c.hosts) == ("group", (4, 5, 6, 7), ("b",))


def test_a_uniform_fleet_stops_after_the_first_split():
    measure, calls = _measure(lambda g: False)
    c = narrowing_conclusion(run_narrowing(measure, WORLD, HOSTS), WORLD, HOSTS)
    assert c.kind == "none" and calls == [WORLD, (0, 1, 2, 3), (4, 5, 6, 7)]


def test_a_failed_sub_group_counts_as_slowest():
    def measure(group):
        return None if 6 in group else 100.0

    c = narrowing_conclusion(run_narrowing(measure, WORLD, HOSTS), WORLD, HOSTS)
    assert (c.kind, c.ranks) == ("rank", (6,))


def test_three_ranks_settle_by_pairs():
    world, hosts = (0, 1, 2), ("a", "a", "a")
    measure, calls = _measure(lambda g: 1 in g)
    c = narrowing_conclusion(run_narrowing(measure, world, hosts), world, hosts)
    assert (c.kind, c.ranks) == ("rank", (1,))
    assert calls == [world, *itertools.combinations(world, 2)]


def test_two_ranks_have_nothing_to_narrow():
    assert narrowing_conclusion((), (0, 1), ("a", "b")).kind == "not_applicable"


def test_conclusion_from_stored_steps_matches_the_live_walk():
    measure, _ = _measure(lambda g: 5 in g)
    steps = run_narrowing(measure, WORLD, HOSTS)
    replayed = tuple(NarrowStep(s.ranks, s.busbw_gbps) for s in steps)
    assert narrowing_conclusion(replayed, WORLD, HOSTS) == narrowing_conclusion(steps, WORLD, HOSTS)
    # A walk cut short (a timeout) is inconclusive, never a clean bill
    assert narrowing_conclusion(steps[:2], WORLD, HOSTS).kind == "inconclusive"


def test_two_nodes_of_two_blame_the_slow_rank_not_the_network():
    """Inside a node NVLink is ~10x the network: a pair across nodes is held only to pairs across nodes,
    so the reference rank's slow link to the suspect's member names that member."""
    hosts, world = ("a", "a", "b", "b"), (0, 1, 2, 3)

    def measure(group):
        bw = 300.0 if len({hosts[r] for r in group}) == 1 else 40.0
        return bw / 4 if 3 in group else bw

    c = narrowing_conclusion(run_narrowing(measure, world, hosts), world, hosts)
    assert (c.kind, c.ranks, c.hosts) == ("rank", (3,), ("b",))
