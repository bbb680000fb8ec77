# Cython declarations for dyn_walk.py (compiled by setup.py): the walk's steps as extension
# types, so the walk reads their fields as C slots (variables as typed memoryviews over
# arrays) and recurses through a C method.
cimport cython

cdef Py_ssize_t LOOP, TEST, BOUND


cdef class WalkStep:
    cdef public Py_ssize_t kind
    cdef public long long[:] key_vars
    cdef public Py_ssize_t width
    cdef public Py_ssize_t first
    cdef public list scratch
    cdef public object rho
    cdef public object buckets
    cdef public long long[:] bind_at
    cdef public long long[:] bind_vars
    cdef public Py_ssize_t binds
    cdef public bint weighted
    cdef public list others

    @cython.locals(k=Py_ssize_t, scratch=list)
    cpdef tuple key(self, list env)


cdef class PushWalk:
    cdef public long long[:] anchor_vars
    cdef public Py_ssize_t arity
    cdef public long long[:] out_vars
    cdef public list row
    cdef public list env
    cdef public object counter
    cdef public Py_ssize_t work
    cdef public list steps
    cdef public Py_ssize_t depth

    @cython.locals(i=Py_ssize_t, added=Py_ssize_t, env=list)
    cpdef Py_ssize_t emit(self, tuple s, w, dict out) except -1
    @cython.locals(step=WalkStep, j=Py_ssize_t, k=Py_ssize_t, added=Py_ssize_t, env=list,
                   row=list)
    cdef Py_ssize_t _from(self, Py_ssize_t i, weight, dict out) except -1
