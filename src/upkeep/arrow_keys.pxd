# Cython declarations for arrow_keys.py (compiled by setup.py): each column's writer is a
# C loop over typed memoryviews of its values, the keys' buffer and the rows' positions.
cimport cython


@cython.locals(i=Py_ssize_t, n="long long", u="unsigned long long", pos=Py_ssize_t)
cpdef void _write_integers(unsigned char[:] data, const long long[:] starts,
                           long long[:] ends, const unsigned char[:] valid, Py_ssize_t k,
                           const long long[:] values)

@cython.locals(i=Py_ssize_t, j=Py_ssize_t, u="unsigned long long", pos=Py_ssize_t)
cpdef void _write_doubles(unsigned char[:] data, const long long[:] starts,
                          long long[:] ends, const unsigned char[:] valid, Py_ssize_t k,
                          const unsigned long long[:] bits)

@cython.locals(i=Py_ssize_t)
cpdef void _write_booleans(unsigned char[:] data, const long long[:] starts,
                           long long[:] ends, const unsigned char[:] valid, Py_ssize_t k,
                           const unsigned char[:] values)

@cython.locals(i=Py_ssize_t, b=Py_ssize_t, code="long long", n=Py_ssize_t,
               u="unsigned long long", pos=Py_ssize_t, first=Py_ssize_t)
cpdef void _write_strings(unsigned char[:] data, const long long[:] starts,
                          long long[:] ends, const unsigned char[:] valid, Py_ssize_t k,
                          const long long[:] codes, const long long[:] offsets,
                          const long long[:] lengths, const unsigned char[:] text)
