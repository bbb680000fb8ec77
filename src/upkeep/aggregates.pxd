# Cython declarations for aggregates.py (compiled by setup.py): the ring element of
# aggregate views as an extension type, its two fields C slots, not dict-backed attributes.
cimport cython

cdef class DualWeight:
    cdef public object c
    cdef public tuple v
    @cython.locals(v=tuple, u=tuple)
    cpdef DualWeight plus(self, DualWeight other)
    @cython.locals(v=tuple, u=tuple)
    cpdef DualWeight times(self, DualWeight other)


@cython.locals(w=DualWeight)
cdef DualWeight _dual(object c, tuple v)
