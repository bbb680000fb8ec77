# Cython declarations for views.py (compiled by setup.py): what a dyn-aggregate view runs
# per change as extension types, their fields C slots and their methods direct calls.
cimport cython

from upkeep.aggregates cimport DualWeight
from upkeep.dyn cimport Representation
from upkeep.exact cimport exact_to_float, float_to_exact
from upkeep.zset cimport add_into, replace_row

cdef class RepStep:
    cdef Representation rep
    cdef dict by_relation
    cdef object select
    cdef object positions
    cdef bint eager
    cpdef step(self, batch, bint want_delta)


cdef class RingSource:
    cdef public object source
    cdef public object relation
    cdef public object leaf
    cdef public list channels
    cdef public object lift
    cdef public Py_ssize_t width
    cdef public object salvage
    cdef public object plain
    cdef public tuple zeros

    @cython.locals(dw=DualWeight, old=DualWeight, lifted=tuple, width=Py_ssize_t, pair=tuple)
    cpdef dict step(self, batch)


cdef tuple _channel_pair(object fn, object exact, object row, object w)
cdef tuple _value_pair(object v, object exact, object w)


# GroupRows' ways of reading an aggregate off a group's weight, C constants in its loop
cdef int _READ_COUNT_STAR, _READ_COUNT, _READ_SUM, _READ_AVERAGE, _READ_DOUBLE_SUM


cdef class GroupRows:
    cdef public tuple reads
    cdef public object finish
    cdef public bint global_group
    cdef public object zero
    cdef public tuple salvages
    cdef public bint checked

    @cython.locals(dw=DualWeight, kind=int, j=Py_ssize_t, vals=list, channels=tuple)
    cpdef row(self, tuple key, w)
    cpdef dict delta(self, dict changes)


@cython.locals(ring=RingSource)
cpdef dict leaf_deltas(dict by_relation, batch)
cpdef step_groups(Representation rep, dict by_relation, batch, bint want_delta, GroupRows rows)


cdef class GroupStep:
    cdef Representation rep
    cdef dict by_relation
    cdef GroupRows rows
    cdef bint eager
    cpdef step(self, batch, bint want_delta)
