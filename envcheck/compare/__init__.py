"""Comparisons of reports: ``envcheck diff`` (machines, runs) and ``envcheck history`` (one machine over time).

Data flows one way: ``match`` pairs cases, ``stats`` puts intervals on their
ratios, ``envdiff`` lists what changed in the environment and health checks,
``diff`` and ``history`` assemble pure-data results, which ``envcheck.render``
shows (terminal, Markdown, HTML, charts). Nothing here probes, measures or renders.
"""
