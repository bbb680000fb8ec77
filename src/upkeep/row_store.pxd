# Cython declarations for row_store.py (compiled by setup.py): the store as an extension
# type, its fields C slots read without attribute lookups on every row's change.
cimport cython

# RowEncoder's kind codes, C constants in the loop
cdef int _STORE_AS_IS, _STORE_DOUBLE, _STORE_DATE, _STORE_DECIMAL, _STORE_WIDE


cdef class RowEncoder:
    cdef public Py_ssize_t width
    cdef public int[:] kinds
    cdef public tuple scales
    cdef public list memos

    @cython.locals(values=list, k=Py_ssize_t, kind=int, stored=int, memo=dict)
    cpdef bytes encode(self, row)


cdef class RowStore:
    cdef public dict _counts
    cdef public object _encode
    cdef public object _decode
    cdef public object _columns
    cdef public object _last_row
    cdef public object _last_key
    cdef public Py_ssize_t _zeros
    cdef public dict _checked
    cpdef _key_of(self, row)
    @cython.locals(counts=dict, hit=tuple)
    cpdef add(self, row, weight, keep_place=*)
