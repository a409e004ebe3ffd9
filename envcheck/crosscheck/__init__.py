"""Cross-checks users can see (``envcheck run --crosscheck``): in the same run, independent tools time the work
envcheck timed, and the report holds every ratio against the bar it is held to.

``run.py`` drives the steps after the suite and the node tests; ``headline.py`` says which single-GPU cases
are cross-checked; ``kernel_worker.py`` / ``kernels.py`` (``triton.testing.do_bench_cudagraph``),
``copy_worker.py`` / ``copies.py`` (a plain torch copy), ``loops.py`` (the plain ``torch.distributed`` loop the
sweep's ranks ran: ``envcheck.node.crosscheck_loop``) and ``nccl_tests_run.py`` (nccl-tests in each mode) are
the tools, each in a child of its own. The raw numbers land in ``envcheck.model.crosscheck``; the ratios,
bars and findings are ``envcheck.analysis.crosscheck``'s.
"""
