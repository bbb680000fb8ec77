# Cython declarations for commit.py (compiled by setup.py): the committer as an extension
# type, its fields C slots read without attribute lookups on every commit.
cimport cython


@cython.locals(n=Py_ssize_t)
cpdef Py_ssize_t _rows(dict deltas)


cdef class Committer:
    cdef public object catalog
    cdef public object durability
    cdef public object clock
    cdef public object batches
    cdef public object metadata
    cdef public object journal
    cdef public object _outbox
    cdef public bint _delivering
