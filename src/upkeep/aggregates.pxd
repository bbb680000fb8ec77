# Cython declarations for aggregates.py (compiled by setup.py): the ring element of
# aggregate views as an extension type, its two fields C slots, not dict-backed attributes.
cdef class DualWeight:
    cdef public object c
    cdef public object v
