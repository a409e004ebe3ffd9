"""Measurements across a node's GPUs and a fleet of nodes: topology and link counters (NVML), peer copies and
the collective sweep in isolated workers, one node's tests in order (``run``), and the fleet run gathered by
rank 0 (``transport``, ``fleet``). Raw results go into ``model.node`` / ``model.fleet``; every number derived
from them is computed in ``analysis.node`` / ``analysis.fleet``.
"""
