"""Your own kernels measured like envcheck's built-in ops (``envcheck bench FILE.py``).

``Op`` (api.py) is the whole public API; discover.py finds the declared ops of a file or
``module:object`` in an isolated subprocess; code.py is what the benchmark worker runs for
them (inputs, implementations, float64 reference), behind the same seam as the built-in ops.
"""

from envcheck.userbench.api import DeclarationError, Op

__all__ = ["DeclarationError", "Op"]
