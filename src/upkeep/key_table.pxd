# Cython declarations for key_table.py (compiled by setup.py): the map as an extension type
# whose arena, entry arrays and index are typed memoryviews, read and written by C loops.
cimport cython

cdef long long _GONE
cdef int _EMPTY, _TOMB
cdef Py_ssize_t _FIRST_SLOTS, _FIRST_ENTRIES, _COMPACT_MIN
cdef unsigned long long _MULTIPLIER, _MIX, _MASK64


@cython.locals(h="unsigned long long", u="unsigned long long", j=Py_ssize_t,
               end=Py_ssize_t)
cpdef unsigned long long hash_of(const unsigned char[:] data, Py_ssize_t start,
                                 Py_ssize_t n)


cdef class KeyTable:
    cdef public object arena
    cdef public unsigned char[:] arena_view
    cdef public Py_ssize_t used, count, live, zeros, garbage, epoch, spot, length
    cdef public Py_ssize_t capacity, mask, filled
    cdef public unsigned long long hash
    cdef public object offset_array, weight_array, slot_array, tag_array
    cdef public long long[:] offsets, weights
    cdef public int[:] slots
    cdef public unsigned char[:] tags

    @cython.locals(view="unsigned char[:]", pos=Py_ssize_t, u=Py_ssize_t, n=Py_ssize_t,
                   offset=Py_ssize_t, j=Py_ssize_t)
    cdef Py_ssize_t _append(self, const unsigned char[:] key) except -1

    @cython.locals(view="unsigned char[:]", pos=Py_ssize_t, n=Py_ssize_t, shift=int,
                   byte=int)
    cdef Py_ssize_t _start(self, Py_ssize_t e)

    cpdef long long weight_at(self, Py_ssize_t e)

    @cython.locals(n=Py_ssize_t, h="unsigned long long", slots="int[:]",
                   view="unsigned char[:]", mask=Py_ssize_t, i=Py_ssize_t, spot=Py_ssize_t,
                   s=int, pos=Py_ssize_t, j=Py_ssize_t, tags="unsigned char[:]",
                   tag="unsigned char")
    cpdef Py_ssize_t find(self, const unsigned char[:] key) except -2

    @cython.locals(pos=Py_ssize_t, slots="int[:]", mask=Py_ssize_t, i=Py_ssize_t)
    cdef Py_ssize_t _slot_of(self, Py_ssize_t e)

    @cython.locals(slots=Py_ssize_t, need=Py_ssize_t, room=Py_ssize_t)
    cpdef reserve(self, Py_ssize_t keys, Py_ssize_t size)

    @cython.locals(slots=Py_ssize_t, need=Py_ssize_t, headroom=Py_ssize_t, size=Py_ssize_t)
    cpdef settle(self)

    @cython.locals(slots="int[:]", mask=Py_ssize_t, weights="long long[:]",
                   view="unsigned char[:]", e=Py_ssize_t, pos=Py_ssize_t, i=Py_ssize_t,
                   tags="unsigned char[:]", h="unsigned long long")
    cpdef _rehash(self, Py_ssize_t size)

    @cython.locals(e=Py_ssize_t)
    cpdef object get(self, const unsigned char[:] key, object default=*)

    @cython.locals(e=Py_ssize_t)
    cpdef long long add(self, const unsigned char[:] key, long long weight,
                        bint keep_place=*) except? -1

    @cython.locals(old="long long", n="long long")
    cpdef long long change(self, Py_ssize_t e, long long weight,
                           bint keep_place=*) except? -1

    @cython.locals(e=Py_ssize_t)
    cpdef insert(self, const unsigned char[:] key, long long weight)

    cdef int _take_out(self, Py_ssize_t e, Py_ssize_t slot) except -1

    @cython.locals(weights="long long[:]", offsets="long long[:]", view="unsigned char[:]",
                   out=Py_ssize_t, used=Py_ssize_t, e=Py_ssize_t, w="long long",
                   start=Py_ssize_t, need=Py_ssize_t, j=Py_ssize_t, size=Py_ssize_t)
    cpdef compact(self, bint drop_zeros)
