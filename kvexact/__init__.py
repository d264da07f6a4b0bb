"""kvexact: exact K/V-cache memory, specified, model-checked and tested.

The distribution's import names are ``kvexact.spec``, ``kvexact.reference``,
``kvexact.kernels`` and ``kvexact.conformance``; this package holds only the version.
"""

__version__ = "0.1.0"
