# Cython declarations for exact.py (compiled by setup.py): the conversion of a double to
# its exact sum scales and compares on C doubles.
cimport cython

cdef double _COARSE_ONE_FLOAT, _COARSE_UNIT_FLOAT, _SCALED_LIMIT, _WHOLE_FROM

@cython.locals(scaled=cython.double)
cpdef object float_to_exact(double x)

# a SUM of doubles read off a dyn group's weight, called directly by views.GroupRows.row
cpdef object exact_to_float(object total)
