# Cython declarations for relation.py (compiled by setup.py): an annotated relation and a
# transaction over it as extension types, so each query's per-tuple steps call the
# annotator's rules (annotators.pxd) directly.  Rows and dicts given to them are typed
# object, as in the .py: a row may be any hashable sequence, a dict any mapping's subclass.
cimport cython

from .annotators cimport Annotator
from .expression cimport Node


#: expression.VAR as a str: ``node.op != VAR`` compiles to a string comparison
cdef str VAR


cdef class ProvenanceRelation:
    cdef public Annotator annotator
    cdef public object arity
    cdef public object annotations
    cdef public dict _indexes
    cdef public dict _distinct
    cdef public object by_variable
    cdef public list compound
    cpdef get(self, row)
    @cython.locals(node=Node)
    cdef bint _unfile(self, row, old) except -1
    @cython.locals(node=Node)
    cdef _file(self, row, new, bint was_compound)
    @cython.locals(annotator=Annotator, was_compound=bint)
    cpdef commit(self, finished)


cdef object _filed_under(object col, object row)


cdef class RelationTransaction:
    cdef public ProvenanceRelation relation
    cdef public Annotator annotator
    cdef public dict finished
    cdef public dict working
    cdef public object p
    cdef public object matched
    cdef public object _journal
    cdef public set new_rows
    cdef public bint loaded
    cpdef close(self)
    cpdef _current(self, row)
    @cython.locals(annotator=Annotator, relation=ProvenanceRelation, rows=set, out=list)
    cpdef list matching(self, pattern)
    @cython.locals(ann=Annotator, updates=dict, change=dict, matched=list, sources=list,
                   before=dict, targets=dict, working=dict, live=Py_ssize_t)
    cpdef dict apply(self, query, Node p)
