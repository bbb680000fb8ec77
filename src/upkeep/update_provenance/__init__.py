"""Update provenance (UP[X]) for hyperplane transactions and its specialisations.

``papers/update-provenance-hyperplane-transactions.txt`` (Bourhis, Deutch, Moskovitch,
SIGMOD 2020) and ``shared/specs/update-provenance.md``: :mod:`.expression` (the UP[X]
expressions), :mod:`.annotators` (naive construction, incremental normal form, concrete
evaluation), :mod:`.hyperplane` (the DML fragment), :mod:`.relation` (annotated relations
and transactions over them), :mod:`.structures` (Boolean, access control, trust, and the
Theorem 4.5 checker).  The local engine's provenance tables are in
:mod:`upkeep.local.provenance`.
"""

from .structures import (
    AccessControl,
    Boolean,
    Trust,
    UpdateStructure,
    UpdateStructureError,
    check_update_structure,
)

__all__ = ["AccessControl", "Boolean", "Trust", "UpdateStructure", "UpdateStructureError",
           "check_update_structure"]
