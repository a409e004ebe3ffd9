"""Cross-checks users can see (``envcheck run --crosscheck``): in the same run, independent tools time the work
envcheck timed, each in a child of its own (``run.py`` drives them; ``headline.py`` picks the single-GPU cases).
The raw numbers land in ``envcheck.model.crosscheck``; ratios, bars and findings are ``analysis.crosscheck``'s.
"""
