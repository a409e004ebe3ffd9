"""Your own kernels measured like envcheck's built-in ops (``envcheck bench FILE.py``): ``Op`` (api.py) is the
public API, discover.py finds a source's ops in a child, code.py is what the worker runs for them."""

from envcheck.userbench.api import DeclarationError, Op

__all__ = ["DeclarationError", "Op"]
