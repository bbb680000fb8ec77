# Cython declarations for row_store.py (compiled by setup.py): the store and its key
# encoder as extension types, their fields C slots read without attribute lookups on every
# row's change, the encoder's loops over C integers.
cimport cython

from upkeep.key_table cimport KeyTable

# RowEncoder's kind codes, C constants in the loops
cdef int _STORE_INTEGER, _STORE_DOUBLE, _STORE_DATE, _STORE_DECIMAL, _STORE_STRING
cdef int _STORE_BOOLEAN, _STORE_WIDE, _STORE_TIMESTAMP


cdef class RowEncoder:
    cdef public Py_ssize_t width
    cdef public int[:] kinds
    cdef public tuple scales
    cdef public list memos
    cdef public list codes
    cdef public list strings
    cdef public object scratch
    cdef public unsigned char[:] view
    cdef public double[:] double_slot
    cdef public unsigned long long[:] double_bits
    cdef public bint busy

    cpdef bytes encode(self, tuple row)

    cpdef bytes _write(self, tuple row)

    @cython.locals(view="unsigned char[:]", width=Py_ssize_t,
                   nulls=Py_ssize_t, pos=Py_ssize_t, k=Py_ssize_t, j=Py_ssize_t, kind=int,
                   d=double, n="long long", u="unsigned long long", memo=dict, codes=dict,
                   text=str, data=bytes)
    cpdef Py_ssize_t _write_into(self, tuple row) except -1


# a dictionary's next code and a memo's new value: C calls from the encoder's loop (as
# Python calls, about 700 instructions each, paid by every row with a value not seen yet)
cdef Py_ssize_t _new_code(dict codes, list strings, str value) except -1
cdef object _remember(dict memo, object value, object stored)



# RowDecoder's ways of making a value from its stored form
cdef int _MAKE_STORED, _MAKE_DATE, _MAKE_DECIMAL, _MAKE_HUGEINT, _MAKE_TIMESTAMP


cdef class RowDecoder:
    cdef public Py_ssize_t width
    cdef public int[:] kinds
    cdef public list strings
    cdef public int[:] makes
    cdef public tuple scales
    cdef public list shares
    cdef public unsigned char[:] skips
    cdef public double[:] double_slot
    cdef public unsigned long long[:] double_bits

    cpdef tuple decode(self, bytes key)

    @cython.locals(values=list, width=Py_ssize_t, nulls=Py_ssize_t, k=Py_ssize_t,
                   j=Py_ssize_t, kind=int, make=int, d=double, n="long long",
                   u="unsigned long long", part="unsigned long long", shift=int,
                   share=dict, skip=bint)
    cpdef tuple decode_at(self, const unsigned char[:] data, Py_ssize_t pos)


cdef class RowStore:
    cdef public object _columns
    cdef public RowEncoder _encoder
    cdef public KeyTable _table
    cdef public object _encode
    cdef public object _decode
    cdef public object _last_row
    cdef public Py_ssize_t _last_entry
    cdef public Py_ssize_t _last_epoch
    cdef public dict _checked
    cdef public Py_ssize_t encodes

    cpdef RowEncoder _writer(self)
    @cython.locals(encoder=RowEncoder, n=Py_ssize_t)
    cpdef Py_ssize_t _find(self, tuple row) except -2
    @cython.locals(table=KeyTable, e=Py_ssize_t, epoch=Py_ssize_t, hit=tuple)
    cpdef Py_ssize_t _remembered(self, tuple row) except -2
    @cython.locals(e=Py_ssize_t)
    cpdef get(self, row, default=*)
    @cython.locals(e=Py_ssize_t)
    cpdef checked_count(self, row)
    cpdef forget(self)
    @cython.locals(table=KeyTable, e=Py_ssize_t, encoder=RowEncoder, n=Py_ssize_t)
    cpdef add(self, row, weight, keep_place=*)
    @cython.locals(starts="const long long[:]", ends="const long long[:]", i=Py_ssize_t,
                   count=Py_ssize_t, size=Py_ssize_t)
    cpdef reserve_keys(self, list parts)
    @cython.locals(table=KeyTable, data="const unsigned char[:]", starts="const long long[:]",
                   ends="const long long[:]", i=Py_ssize_t, e=Py_ssize_t)
    cpdef Py_ssize_t first_held(self, keys) except -2
    cpdef add_parts(self, list parts, long long weight)
    @cython.locals(table=KeyTable, data="const unsigned char[:]", starts="const long long[:]",
                   ends="const long long[:]", i=Py_ssize_t)
    cpdef add_keys(self, keys, long long weight)
    @cython.locals(table=KeyTable, e=Py_ssize_t, following=Py_ssize_t, seen=Py_ssize_t,
                   n="long long", out=list)
    cpdef tuple _decoded(self, RowDecoder decoder, Py_ssize_t start, Py_ssize_t end,
                         Py_ssize_t step, Py_ssize_t limit)
