"""Every module that registers formulas, imported explicitly: :func:`load_all` returns the full registry.

The registry itself (``formulas.py``) imports none of its registrants, so no module of the reference
imports back into it through this list.
"""

from __future__ import annotations

from kvexact.reference import formulas_seed, ledgers, manifest, translate, traversal
from kvexact.reference.formulas import REGISTRY, Formula

REGISTRANTS = (ledgers, manifest, translate, traversal, formulas_seed)


def load_all() -> dict[str, Formula]:
    """The registry once every registrant above has run its ``@formula`` declarations (at import)."""
    return REGISTRY
