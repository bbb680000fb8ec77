# Cython declarations for gc_pause.py (compiled by setup.py): the pause that bulk work (a
# batch of PAUSE_ROWS rows or more, a load, a view's build) enters, as an extension type, so
# entering and leaving it costs no interpreted frames.
cdef class gc_paused:
    cdef public Py_ssize_t rows
    cdef public bint paused
