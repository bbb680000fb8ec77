# Cython declarations for operators.py (compiled by setup.py): an atom's column-only
# filter-and-project as an extension type, its loops over C arrays of positions.
cimport cython

cdef class ColumnLeaf:
    cdef public object pick
    cdef public Py_ssize_t start
    cdef public Py_ssize_t stop
    cdef public long long[:] nonnull
    cdef public long long[:] left
    cdef public long long[:] right
    cdef public bint whole

    @cython.locals(k=Py_ssize_t)
    cpdef object project(self, r)
