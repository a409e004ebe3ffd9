"""Probes: facts about the machine, each a value or the recorded reason it is missing."""
