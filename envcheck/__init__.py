"""envcheck: is this GPU machine healthy, how fast is it, and what changed."""

__version__ = "0.1.0"
