"""Measurements across a node's GPUs and across a fleet of nodes: topology, link error counters,
peer copies, collectives under torchrun, and the fleet run that gathers them on rank 0."""
