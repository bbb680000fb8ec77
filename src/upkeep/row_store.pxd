# Cython declarations for row_store.py (compiled by setup.py): the store as an extension
# type, its fields C slots read without attribute lookups on every row's change.
cdef class RowStore:
    cdef public object _counts
    cdef public object _encode
    cdef public object _decode
    cdef public object _columns
    cdef public object _last_row
    cdef public object _last_key
    cdef public Py_ssize_t _zeros
    cdef public dict _checked
    cpdef _key_of(self, row)
