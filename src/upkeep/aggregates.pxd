# Cython declarations for aggregates.py (compiled by setup.py): the ring element of
# aggregate views as an extension type, its two fields C slots, not dict-backed attributes.
cimport cython

cdef class DualWeight:
    cdef public object c
    cdef public object v


@cython.locals(w=DualWeight)
cdef DualWeight _dual(object c, object v)
