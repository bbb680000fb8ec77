# Cython declarations for durability.py (compiled by setup.py): the durable state as an
# extension type, so that the checks and the log call every commit makes (check_open,
# log, wants_snapshot) are direct calls reading C slots, not attribute lookups.
cdef class Durability:
    cdef public object storage
    cdef public bint closed
    cdef public Py_ssize_t holding

    cpdef check_open(self)
    cpdef log(self, tuple record)
    cpdef bint wants_snapshot(self)
