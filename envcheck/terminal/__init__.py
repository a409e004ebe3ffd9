"""Terminal output: rich renderings of facts, checks and benchmark runs."""
