# Cython declarations for dyn.py (compiled by setup.py): a node's state and its indexes as
# extension types, so UPDATE reads their fields as C slots and calls their methods directly.
cdef class Index:
    cdef public object key
    cdef public object buckets
    cdef public object totals
    cpdef insert(self, t, w)
    cpdef remove(self, t, w)
    cpdef reweight(self, t, w)
    cpdef adjust(self, k, w)


cdef class NodeState:
    cdef public object node
    cdef public object node_id
    cdef public object parent_id
    cdef public object rho
    cdef public dict indexes
    cdef public list weighted
    cdef public object push
    cdef public bint in_n
    cdef public bint frontier
    cpdef add(self, t, w)
    cpdef process(self, dict deltas)
