# Cython declarations for types.py (compiled by setup.py): the row check as an extension
# type, its loop over the columns on C integers and C doubles.
cimport cython

# RowCheck's kind codes, C constants in the loop
cdef int _CHECK_SMALL_INT, _CHECK_HUGE_INT, _CHECK_TEXT, _CHECK_DOUBLE, _CHECK_BOOLEAN
cdef int _CHECK_DATE, _CHECK_DECIMAL, _CHECK_TIMESTAMP

cdef class RowCheck:
    cdef public Py_ssize_t width
    cdef public int[:] kinds
    cdef public long long[:] lows
    cdef public long long[:] highs
    cdef public tuple precisions
    cdef public tuple scales

    @cython.locals(row=tuple, k=Py_ssize_t, kind=int, small=cython.longlong, text=str,
                   x=cython.double)
    cpdef bint valid(self, r)
