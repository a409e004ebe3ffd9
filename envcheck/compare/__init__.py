"""Comparisons of reports: ``envcheck diff`` (machines, runs) and ``envcheck history`` (each machine over time).

Pure data built from reports and their analyses: ``match`` pairs case results, ``stats`` holds what only a
comparison has (ratios, intervals, noise floors, verdicts), ``shipped`` the floors learned from committed
controls, ``diff``, ``node_diff`` and ``history`` assemble, ``export`` writes versioned JSON. Nothing here
probes, measures, derives a per-report number or phrases a sentence.
"""
