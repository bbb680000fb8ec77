# Cython declarations for dyn.py (compiled by setup.py): a node's state, its indexes and the
# representation as extension types, so UPDATE reads their fields as C slots and calls their
# methods directly.
cimport cython

from upkeep.zset cimport add_into

cdef class Index:
    cdef public object key
    cdef public object buckets
    cdef public object totals
    cdef public bint counted
    cpdef insert(self, t, w)
    cpdef remove(self, t, w)
    cpdef reweight(self, t, w)
    cpdef total(self, k)
    cpdef adjust(self, k, w)


# EquiPush's kinds, C constants in its loop
cdef int _PUSH_PROJECTION, _PUSH_LOOKUP, _PUSH_TOTALS, _PUSH_JOIN


cdef class EquiPush:
    cdef public int kind
    cdef public object make
    cdef public object key
    cdef public object rho_m
    cdef public Index index
    @cython.locals(kind=int, index=Index)
    cpdef run(self, dict delta, dict pd)


cdef _accumulate(dict target, object k, object w)


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
    cdef public list other_weights
    cdef public bint counted
    cpdef add(self, t, w)
    cdef _reweighted(self, t, w, old, bint taken_out)
    @cython.locals(equi=EquiPush)
    cpdef process(self, dict deltas)


cdef class Representation:
    cdef public object pair
    cdef public list thetas
    cdef public object compile
    cdef public dict _env_checks
    cdef public Py_ssize_t width
    cdef public dict states
    cdef public NodeState root_state
    cdef public list lower
    cdef public list upper
    cdef public dict leaf_of_atom
    cdef public object frontier
    cdef public object _plan_of_n
    cdef public dict _schedules
    cdef public dict _anchored_by_id
    cdef public dict _emitters
    cdef public Py_ssize_t push_anchors
    cdef public Py_ssize_t push_outputs
    cdef public list enum_work
    cdef public list _n_checks
    cdef public object _root_out
    cdef public object _loops

    cdef tuple _schedule(self, leaves)
    cpdef update(self, dict leaf_deltas, bint want_delta)
    cpdef dict by_leaf(self, dict leaf_deltas)
    @cython.locals(st=NodeState)
    cpdef update_leaves(self, dict deltas, bint want_delta)
    @cython.locals(st=NodeState)
    cdef dict _changes(self, list upper, list touched, dict deltas)
    @cython.locals(st=NodeState)
    cdef list _touched(self, list upper, dict deltas)
    @cython.locals(st=NodeState)
    cdef list _update_below_n(self, dict deltas)
    cpdef dict difference(self, dict leaf_deltas, row=*, positions=*)
    @cython.locals(st=NodeState, node_state=NodeState)
    cpdef dict difference_leaves(self, dict deltas, row=*, positions=*)
    @cython.locals(node_state=NodeState)
    cdef dict _rows_of_changes(self, NodeState st, list upper, dict deltas, tuple positions)
    @cython.locals(node_state=NodeState)
    cdef dict _delta_of_one_frontier(self, NodeState st, list upper, dict deltas)
    cdef tuple _anchored(self, anchor)
    cdef object _emitter_of(self, anchor, tuple positions)
