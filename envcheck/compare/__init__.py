"""Comparisons of reports (``envcheck diff``, ``envcheck history``) as pure data built from their analyses: what
only a comparison has (ratios, intervals, noise floors, verdicts); nothing here derives a per-report number.
"""
