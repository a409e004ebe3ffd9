"""Measurements across a node's GPUs and across a fleet of nodes.

- ``topology``, ``smi_text``: how the GPUs connect (NVML through its seam; ``nvidia-smi topo -m`` and
  ``nvlink -s`` as cross-check and fallback);
- ``counters``, ``xid``: link error counters dated by the uptime, Xid events from the kernel log, and
  the ``links`` section of the environment the link checks read;
- ``launch``: the one seam that starts processes (multicast off, time limits, process groups stopped);
- ``peer_worker`` / ``peer``: copy-engine and SM copy matrices in an isolated worker;
- ``collective_bench`` / ``collective_worker`` / ``collective_run`` / ``nccl_log`` / ``narrowing``: the
  collective sweep under torchrun, NCCL's own choices, and the bisection of a slow collective;
- ``nccl_tests``: nccl-tests' output, for the evidence that the numbers agree;
- ``run``: one node's tests in order, and ``envcheck run --gpus``'s part;
- ``transport`` / ``fleet``: the fleet run on torch.distributed, gathered by rank 0.

Raw results go into ``envcheck.model.node`` / ``envcheck.model.fleet``; every number derived from them
is computed in ``envcheck.analysis.node`` / ``envcheck.analysis.fleet``.
"""
