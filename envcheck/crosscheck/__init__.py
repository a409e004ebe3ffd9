"""``envcheck run --crosscheck``: independent tools time the work envcheck timed, in the same run (``run.py``);
the raw numbers land in ``model.crosscheck``, ratios and findings are ``analysis.crosscheck``'s."""
