"""SIGTERM or SIGHUP during the node tests of ``envcheck run --gpus`` stops them as Ctrl-C does: the node as far as it
got comes back marked interrupted, so the report is written (before, the signal ended the process with none)."""

from __future__ import annotations

import os
import signal

import pytest

from envcheck.harness.signals import as_interrupt, stop_signals
from envcheck.model.node import Node
from envcheck.node import steps as node_steps


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_is_a_keyboard_interrupt_once_and_the_handlers_come_back(sig):
    before = signal.getsignal(sig)
    with pytest.raises(KeyboardInterrupt, match=signal.Signals(sig).name):
        with stop_signals(as_interrupt):
            os.kill(os.getpid(), sig)
            signal.sigtimedwait([], 0.5) if hasattr(signal, "sigtimedwait") else None
    assert signal.getsignal(sig) == before
    with stop_signals(as_interrupt):  # a second signal while the first unwinds is ignored
        handler = signal.getsignal(sig)
        with pytest.raises(KeyboardInterrupt):
            handler(sig, None)  # type: ignore[operator]
        handler(sig, None)  # type: ignore[operator]


def test_sigterm_during_the_node_tests_returns_the_node_marked_interrupted(monkeypatch, tmp_path):
    class Done:
        runs = ()
        stopped = None

    monkeypatch.setattr("envcheck.bench.parallel.run_gpus", lambda *a, **k: Done())

    def run_node(options, deps):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0.5) if hasattr(signal, "sigtimedwait") else None
        except KeyboardInterrupt:  # as run_node does: the node as far as it got
            raise KeyboardInterrupt(Node("vm", (0, 1), settings={"interrupted": True})) from None
        return Node("vm", (0, 1))

    monkeypatch.setattr(node_steps, "run_node", run_node)

    result = node_steps.run_node_suite((0, 1), (), str(tmp_path), 60.0)
    assert result.interrupted and result.node.settings.get("interrupted") is True
