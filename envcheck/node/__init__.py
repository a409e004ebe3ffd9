"""Measurements across a node's GPUs and a fleet: topology and link counters, peer copies and the collective sweep in
isolated workers, one node's tests (``run``), the fleet gathered by rank 0 (``transport``, ``fleet``). Raw results
only: numbers are derived in ``analysis.node`` / ``analysis.fleet``."""
