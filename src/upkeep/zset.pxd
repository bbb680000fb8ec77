# Cython declarations for zset.py (compiled by setup.py): a Z-set's sum and a derived row's
# replacement as C functions, which the compiled modules that cimport them call directly.

cpdef add_into(target, row, w)
cpdef replace_row(delta, old, new)
