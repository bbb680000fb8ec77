# Cython declarations for expression.py (compiled by setup.py): an expression node as an
# extension type, so a transaction's normal form (annotators.py) builds its nodes with C
# slots and direct calls.
cimport cython


# readonly: a node is immutable, so nodes cannot form a cycle, which the collector, which
# does not track them (expression.py), would never free
cdef class Node:
    cdef readonly str op
    cdef readonly tuple args
    cdef readonly object name
    cdef readonly bint live
    cdef readonly unsigned long long mask
    cdef readonly Py_hash_t _hash


@cython.locals(node=Node)
cdef Node _node(str op, tuple args, object name, bint live, unsigned long long mask)
cpdef Node plus_i(Node a, Node p)
cpdef Node minus(Node a, Node p)
cpdef Node plus_m(Node a, Node s)
cpdef Node times_m(Node s, Node p)
cpdef Node total(terms)
cdef unsigned long long _HASH_BITS, _HASH_PRIME
@cython.locals(h=cython.ulonglong, x=Node)
cdef Py_hash_t _structural_hash(str op, tuple args, object name) except? -1
