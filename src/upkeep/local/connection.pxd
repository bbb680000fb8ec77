# Cython declarations for connection.py (compiled by setup.py): the objects a single-row
# change goes through typed, so that checking and committing it are direct calls.
cimport cython

from upkeep.local.catalog cimport LocalCatalog
from upkeep.local.commit cimport Committer
from upkeep.local.durability cimport Durability
from upkeep.table cimport Table


@cython.locals(durability=Durability, committer=Committer, catalog=LocalCatalog)
cpdef _stage_delta(db, Table table, dict delta)


@cython.locals(t=Table, catalog=LocalCatalog)
cpdef _rows_changed(db, table, rows, weight)

cpdef _change_rows(db, Table t, rows, weight)
