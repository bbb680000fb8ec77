# Cython declarations for catalog.py (compiled by setup.py): the catalog as an extension
# type, so that what every commit reads of it (its tables, views, subscribers, plans,
# expiring tables and provenance tracker) are C slots read directly by the committer and
# the single-row path, not attribute lookups on a Python object.
cdef class LocalCatalog:
    cdef public object bdd_ordering
    cdef public object fixpoint_partitions
    cdef public dict tables
    cdef public dict views
    cdef public dict subscribers
    cdef public dict user_views
    cdef public dict _definitions
    cdef public dict _helpers
    cdef public object _overlay
    cdef public object _listening
    cdef public dict _affected
    cdef public dict plans
    cdef public object last_batch
    cdef public dict expiring
    cdef public object provenance
    cdef public dict witnesses
    cdef public dict _why_index
    cdef public object _by_extremum
    cdef public object snapshots
    # other attributes, and methods replaced on an instance (tests count calls that way)
    cdef dict __dict__

    cpdef table(self, name)
