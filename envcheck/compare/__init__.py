"""Comparisons of reports: ``envcheck diff`` (machines, runs) and ``envcheck history`` (each machine over time).

Pure data, built from reports and their analyses (``envcheck.analysis``: every per-report
number), one way: ``match`` pairs case results and says which pairs may not be compared,
``shipped`` holds the noise floors learned from committed controls, ``stats`` holds what only a
comparison has (ratios, intervals with their noise floors, verdicts, geometric means),
``envdiff`` lists what changed in the environment and health checks, ``machine`` tells
machines apart by their GPUs, ``node_diff`` compares two nodes' tests (read through the one
adapter ``node_read``), ``fleet_nodes`` splits fleet reports into nodes and pairs them by
identity, ``diff`` and ``history`` assemble the results and ``export`` writes a diff as
versioned JSON. The presentation (terminal, Markdown, HTML, charts) renders
them; nothing here probes, measures, derives a per-report number or phrases a sentence.
"""
