"""Derived numbers: everything computed from a report's raw results, in one place."""
