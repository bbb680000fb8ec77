# Cython declarations for dyn_walk.py (compiled by setup.py): the walk's steps as extension
# types, so the walk reads their fields as C slots (variables as typed memoryviews over
# arrays) and recurses through C methods, a leaf's action a C method its subclass overrides.
cimport cython

from upkeep.zset cimport add_into

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
    cdef public object node_id
    cdef public list others

    @cython.locals(k=Py_ssize_t, scratch=list)
    cpdef tuple key(self, list env)


cdef class PushWalk:
    cdef public long long[:] gather_vars
    cdef public list gathered
    cdef public long long[:] bound_vars
    cdef public Py_ssize_t arity
    cdef public list env
    cdef public object counter
    cdef public Py_ssize_t work
    cdef public list steps
    cdef public Py_ssize_t depth

    @cython.locals(i=Py_ssize_t, env=list, reached=Py_ssize_t)
    cdef Py_ssize_t _walk(self, tuple values, weight) except -1
    @cython.locals(step=WalkStep, j=Py_ssize_t, reached=Py_ssize_t, env=list)
    cdef Py_ssize_t _from(self, Py_ssize_t i, weight) except -1
    cdef Py_ssize_t _leaf(self, weight) except -1
    @cython.locals(k=Py_ssize_t, env=list, values=list)
    cdef tuple _gathered(self)


cdef class RowsWalk(PushWalk):
    cdef public dict out

    cpdef Py_ssize_t emit(self, tuple s, w, dict out) except -1
    cdef Py_ssize_t _leaf(self, weight) except -1


cdef class ContextWalk(PushWalk):
    cdef public object one
    cdef public list found

    cpdef list context(self, tuple key)
    cdef Py_ssize_t _leaf(self, weight) except -1
