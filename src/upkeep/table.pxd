# Cython declarations for table.py (compiled by setup.py): a base table as an extension
# type, its fields C slots and its row store typed, so that checking and applying a change
# reads them without attribute lookups.
cimport cython

from upkeep.row_store cimport RowStore
from upkeep.types cimport RowCheck


cdef class Table:
    cdef public str name
    cdef public object columns
    cdef public list column_names
    cdef public RowStore rows
    cdef public object not_null
    cdef public object key
    cdef public RowStore keys
    cdef public object expiry
    cdef public object provenance
    cdef public dict _by_column
    cdef public dict _distinct
    cdef public Py_ssize_t version
    cdef public RowCheck row_check

    cpdef bint valid(self, row)
    cpdef coerce(self, row, Py_ssize_t index)
    cpdef check_constraints(self, delta)
    @cython.locals(rows=RowStore, batch=bint)
    cpdef check_rows(self, delta)
    cpdef check_not_null(self, row)
    @cython.locals(keys=RowStore)
    cpdef check_keys(self, changed)
    cpdef duplicate_key(self, tuple key)
    @cython.locals(keys=RowStore, i=Py_ssize_t)
    cpdef check_new_keys(self, dict changed, list key_parts)
    @cython.locals(rows=RowStore, keys=RowStore)
    cpdef apply(self, delta, bint keep_places=*)
    cpdef bint takes_keys(self)
    @cython.locals(rows=RowStore, keys=RowStore)
    cpdef apply_keys(self, list parts, dict key_counts, list key_parts=*,
                     long long weight=*)
