# Cython declarations for key_table.py (compiled by setup.py): the map as an extension type
# whose arena and index are typed memoryviews, read and written by C loops.
cimport cython

cdef long long _GONE, _EMPTY, _TOMB, _OFFSET_MASK
cdef int _OFFSET_BITS, _TAG_SHIFT, _HEADER
cdef Py_ssize_t _FIRST_SLOTS, _COMPACT_MIN
cdef unsigned long long _MULTIPLIER, _MIX, _MASK64


@cython.locals(h="unsigned long long", u="unsigned long long", j=Py_ssize_t,
               end=Py_ssize_t)
cpdef unsigned long long hash_of(const unsigned char[:] data, Py_ssize_t start,
                                 Py_ssize_t n)


cdef class KeyTable:
    cdef public object arena
    cdef public unsigned char[:] arena_view
    cdef public Py_ssize_t used, count, live, zeros, garbage, epoch, spot, length
    cdef public Py_ssize_t mask, filled
    cdef public unsigned long long hash
    cdef public object slot_array
    cdef public long long[:] slots

    @cython.locals(view="unsigned char[:]", pos=Py_ssize_t, u=Py_ssize_t, n=Py_ssize_t,
                   offset=Py_ssize_t, j=Py_ssize_t)
    cdef Py_ssize_t _append(self, const unsigned char[:] key, long long weight) except -1

    @cython.locals(view="unsigned char[:]", pos=Py_ssize_t, n=Py_ssize_t, shift=int,
                   byte=int)
    cdef Py_ssize_t _start(self, Py_ssize_t e)

    @cython.locals(view="unsigned char[:]", u="unsigned long long", j=int)
    cdef void _set_weight(self, Py_ssize_t e, long long weight)

    @cython.locals(view="unsigned char[:]", w="long long", j=int)
    cpdef long long weight_at(self, Py_ssize_t e)

    @cython.locals(pos=Py_ssize_t)
    cpdef Py_ssize_t next_entry(self, Py_ssize_t e)

    @cython.locals(n=Py_ssize_t, h="unsigned long long", slots="long long[:]",
                   view="unsigned char[:]", mask=Py_ssize_t, i=Py_ssize_t, spot=Py_ssize_t,
                   s="long long", pos=Py_ssize_t, j=Py_ssize_t, tag="long long",
                   e=Py_ssize_t)
    cpdef Py_ssize_t find(self, const unsigned char[:] key) except -2

    @cython.locals(pos=Py_ssize_t, slots="long long[:]", mask=Py_ssize_t, i=Py_ssize_t)
    cdef Py_ssize_t _slot_of(self, Py_ssize_t e)

    @cython.locals(slots=Py_ssize_t, need=Py_ssize_t, room=Py_ssize_t)
    cpdef reserve(self, Py_ssize_t keys, Py_ssize_t size)

    @cython.locals(slots=Py_ssize_t, headroom=Py_ssize_t, size=Py_ssize_t)
    cpdef settle(self)

    @cython.locals(slots="long long[:]", mask=Py_ssize_t, view="unsigned char[:]",
                   e=Py_ssize_t, pos=Py_ssize_t, i=Py_ssize_t, used=Py_ssize_t,
                   following=Py_ssize_t, h="unsigned long long")
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

    @cython.locals(view="unsigned char[:]", out=Py_ssize_t, used=Py_ssize_t, e=Py_ssize_t,
                   end=Py_ssize_t, following=Py_ssize_t, w="long long", need=Py_ssize_t,
                   j=Py_ssize_t, size=Py_ssize_t)
    cpdef compact(self, bint drop_zeros)
