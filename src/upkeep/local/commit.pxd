# Cython declarations for commit.py (compiled by setup.py): the committer as an extension
# type, its fields C slots read without attribute lookups on every commit.
cimport cython

from upkeep.local.catalog cimport LocalCatalog
from upkeep.local.durability cimport Durability
from upkeep.table cimport Table


@cython.locals(n=Py_ssize_t)
cpdef Py_ssize_t _rows(dict deltas)

cpdef tuple _batch_record(batch, dict deltas, metadata, now, provenance)

cdef list _pairs(dict delta)


cdef class Committer:
    cdef public LocalCatalog catalog
    cdef public Durability durability
    cdef public object clock
    cdef public object batches
    cdef public object metadata
    cdef public object journal
    cdef public object _outbox
    cdef public bint _delivering

    cpdef commit(self, dict deltas, bint checked=*, metadata=*, bint expiring=*, applied=*,
                 bulk=*)
    cpdef dict _apply_batch(self, dict deltas, bint checked, metadata, bint expiring, applied,
                            bulk=*)
    cpdef _deliver(self, batch=*, told=*)
    @cython.locals(plans=dict, plan=tuple)
    cpdef dict _commit(self, dict deltas, bint checked, metadata, bint expiring, provenance=*,
                       bulk=*)
    cpdef _log_batch(self, tuple record, dict changed)
    @cython.locals(target=Table, inputs=tuple, read_later=bint)
    cpdef dict _push(self, dict deltas, list steps, want, bint undo, tuple record=*,
                     bint keep_places=*, bulk=*)
    cpdef dict _keys_or_rows(self, dict deltas, dict bulk)
