# Cython declarations for annotators.py (compiled by setup.py): the annotators as extension
# types, so the rules a hyperplane query applies to each tuple run as C calls over C slots.
cimport cython

from .expression cimport Node, minus, plus_i, plus_m, times_m, total


#: the normal form's five states, compared as C integers
cdef int BASE, INS, DEL, MOD, DELMOD
#: expression.ZERO as a str: ``node.op == ZERO`` compiles to a string comparison
cdef str ZERO


cdef class Annotator:
    cdef public object absent
    @cython.locals(node=Node)
    cpdef bint dropped(self, final)
    cpdef start(self, node)
    cpdef bint in_support(self, w)
    cpdef bint live(self, w)
    cpdef insert(self, w, Node p)
    cpdef delete(self, w, Node p)
    cpdef modify_target(self, w, sources, Node p)
    cpdef finish(self, w, Node p)


cdef class Naive(Annotator):
    pass


cdef class NormalForm(Annotator):
    @cython.locals(kind=int, a=Node)
    cpdef bint in_support(self, w)
    @cython.locals(kind=int, a=Node, x=Node)
    cpdef bint live(self, w)
    @cython.locals(kind=int, a=Node, x=Node, flowing=dict)
    cpdef modify_target(self, w, sources, Node p)
    @cython.locals(kind=int, a=Node, zero=bint)
    cpdef finish(self, w, Node p)


cdef class Concrete(Annotator):
    cdef public object structure
    cdef public object valuation


@cython.locals(kind=int)
cdef object _contribution(tuple w)
