# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True, annotation_typing=False
"""Cython core of :mod:`kerasrl.buffer`.

Every field is one contiguous, C-ordered numpy array ``[capacity, *row_shape]`` that grows by
doubling; rows are copied as raw byte blocks (``memcpy``), so the same code serves every
numeric dtype.  Rows ``[0, len)`` of a storage array are never written again once appended:
operations that reorder or drop rows (``set``, ``shuffle``, truncation, ``reset_field``) switch
the field to a fresh array.  Views handed out by ``.array`` / slicing therefore never change
under the caller's feet (they are read-only so that the caller cannot change the buffer).
The one reuse: ``reset_field`` keeps the old storage for the next rows when nothing else
references it (no view is alive), as a list keeps its capacity.

``Buffer.append_batch`` goes through a ``BatchAppender`` that holds pointers to the hot state
(``FieldState``) of every target field, so one step for N agents × F fields costs F dict
lookups and one C loop of N × F row copies.  Version cells on the dicts tell it when the
agent/field structure changed; a global counter of (dtype, shape) changes tells it when the
fields must be re-checked against the incoming arrays.

``cdivision`` is on: every ``//`` and ``%`` here has a non-negative dividend and a positive
divisor (checked beforehand), where C and Python semantics agree.
"""
cimport numpy as cnp
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject, _Py_REFCNT
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.float cimport FLT_MAX
from libc.math cimport fabs, isfinite, isinf
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

import operator

import numpy as np

cnp.import_array()


class BufferException(Exception):
    """Raised for invalid buffer operations: shape/dtype mismatches, unequal field lengths,
    batch requests larger than the data, and unreadable or unwritable buffer files."""


BufferException.__module__ = "kerasrl.buffer"

TOO_LARGE = (
    "The batch size and training length requested for get_batch where too large given the "
    "current number of data points."
)

cdef enum:
    MAXD = 8            # row ndim up to which the fast paths compare shapes in C
    MAXND = 64          # numpy's NPY_MAXDIMS

cdef enum:
    FS_NONE = 0
    FS_F32 = 1
    FS_F64 = 2
    FS_I64 = 3
    FS_BOOL = 4

cdef enum:
    CAT_NONE = 0
    CAT_BOOL = 1
    CAT_INT = 2
    CAT_FLOAT = 3
    CAT_COMPLEX = 4

cdef object _F32 = np.dtype(np.float32)
cdef object _F64 = np.dtype(np.float64)
cdef object _I64 = np.dtype(np.int64)
cdef object _BOOL = np.dtype(np.bool_)
cdef object _ZERO = 0
cdef object _I64_LO = int(np.iinfo(np.int64).min)
cdef object _I64_HI = int(np.iinfo(np.int64).max)
cdef dict _CANON = {}
cdef dict _SIGS = {}


cdef inline int _cat_of(object dt):
    """Dtype category: rows may only be converted within one category."""
    cdef char k = (<cnp.dtype>dt).kind
    if k == b'b':
        return CAT_BOOL
    if k == b'i' or k == b'u':
        return CAT_INT
    if k == b'f':
        return CAT_FLOAT
    if k == b'c':
        return CAT_COMPLEX
    return CAT_NONE


cdef object _canonical(object dt):
    """The shared native-byte-order dtype instance equal to ``dt``, or None if unsupported."""
    c = _CANON.get(dt)
    if c is None:
        if _cat_of(dt) == CAT_NONE:
            c = False
        else:
            c = np.dtype(dt.newbyteorder("=").str)
        _CANON[dt] = c
    return None if c is False else c


cdef Py_ssize_t _sig_of(object dtype, tuple shape):
    """Small integer naming a (dtype, row shape) pair; 0 means 'uninitialised'."""
    key = (dtype, shape)
    s = _SIGS.get(key)
    if s is None:
        s = len(_SIGS) + 1
        _SIGS[key] = s
    return s


cdef bint _numpy_origin(object x):
    """True if ``x`` (or its first nested element) is numpy data, whose dtype is kept."""
    while isinstance(x, (list, tuple)) and len(x) > 0:
        x = x[0]
    return isinstance(x, (np.ndarray, np.generic, AgentBufferField))


cdef inline object _contig(object arr):
    """``arr`` if C-contiguous, else a C-ordered copy (0-d arrays stay 0-d)."""
    if cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>arr):
        return arr
    return arr.copy(order="C")


cdef object _asarray(object x, object label):
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as e:
        raise BufferException(
            f"Field {label}: cannot convert {type(x).__name__} to rows: {e}"
        ) from e


cdef object _index(object v, str what):
    try:
        return operator.index(v)
    except TypeError:
        raise BufferException(f"{what} must be an integer, got {v!r}") from None


cdef int _pv_mode(object pv, double* d):
    """Classify a padding value for the C padding fast paths.

    0: use numpy; 1: real number exactly ``d`` (not NaN); 2: as 1 and of an integer/bool type.
    """
    t = type(pv)
    if t is int or t is bool:
        if not (_I64_LO <= pv <= _I64_HI):
            return 0
        v = float(pv)
        if v != pv:
            return 0
        d[0] = v
        return 2
    if t is np.bool_:
        d[0] = 1.0 if pv else 0.0
        return 2
    if t is float or t is np.float64 or t is np.float32 or t is np.float16:
        v = float(pv)
        if v != v:
            return 0
        d[0] = v
        return 1
    if isinstance(pv, np.integer):
        v = float(pv)
        if v != int(pv):
            return 0
        d[0] = v
        return 1
    return 0


cdef struct Spec:
    bint seq
    Py_ssize_t L
    Py_ssize_t npad     # sequential: padding rows before (or, pad_end, after) the data
    bint pad_end        # sequential: the padding follows the data
    Py_ssize_t start    # sequential: first data row
    Py_ssize_t count    # sequential: data rows
    Py_ssize_t nwin     # windows: number of windows
    Py_ssize_t first    # windows: start row of the first window


cdef int _make_spec(Py_ssize_t n, object batch_size, object training_length, bint sequential,
                    Spec* s, bint pad_end=False) except -1:
    """get_batch's arithmetic (as ML-Agents 0.9's); raises BufferException for bad requests."""
    cdef Py_ssize_t L, bs, leftover, max_b
    L = 1 if training_length is None else _index(training_length, "training_length")
    if L < 1:
        raise BufferException(f"training_length must be at least 1, got {L}")
    if batch_size is not None:
        bs = _index(batch_size, "batch_size")
        if bs < 0:
            raise BufferException(f"batch_size must be non-negative, got {bs}")
    s.seq = sequential
    s.L = L
    s.npad = s.start = s.count = s.nwin = s.first = 0
    s.pad_end = pad_end
    if sequential:
        leftover = n % L
        max_b = n // L + (1 if leftover != 0 else 0)
        if batch_size is None:
            bs = max_b
        if bs > max_b:
            raise BufferException(TOO_LARGE)
        if bs * L > n:
            s.npad = L - leftover
            s.count = n
        else:
            s.start = n - bs * L
            s.count = bs * L
    else:
        if batch_size is None:
            bs = n - L + 1
        if n - L + 1 < bs:
            raise BufferException(TOO_LARGE)
        if bs > 0:
            s.nwin = bs
            s.first = n - bs + 1 - L
    return 0


cdef inline Py_ssize_t _spec_rows(const Spec* s) noexcept nogil:
    if s.seq:
        return s.npad + s.count
    return s.nwin * s.L


def batch_rows(Py_ssize_t n, batch_size=None, training_length=1, bint sequential=True) -> int:
    """Rows ``get_batch(batch_size, training_length, sequential)`` returns for ``n`` rows
    (the same wherever the padding goes)."""
    cdef Spec s
    if n < 0:
        raise BufferException(f"the number of rows must be non-negative, got {n}")
    _make_spec(n, batch_size, training_length, sequential, &s)
    return _spec_rows(&s)


cdef void _write_spec(const char* src, Py_ssize_t rb, const Spec* s, const char* pad,
                      char* dst) noexcept nogil:
    """Write the rows selected by ``s`` (plus padding) from ``src`` to ``dst``."""
    cdef Py_ssize_t k, blk, data_at = 0 if s.pad_end else s.npad
    cdef Py_ssize_t pad_at = s.count if s.pad_end else 0
    if s.seq:
        for k in range(s.npad):
            memcpy(dst + (pad_at + k) * rb, pad, rb)
        if s.count:
            memcpy(dst + data_at * rb, src + s.start * rb, s.count * rb)
    elif s.L == 1:
        memcpy(dst, src + s.first * rb, s.nwin * rb)
    else:
        blk = s.L * rb
        for k in range(s.nwin):
            memcpy(dst + k * blk, src + (s.first + k) * rb, blk)


cdef void _gather(char* dst, const char* src, const int64_t* idx, Py_ssize_t count,
                  Py_ssize_t blk) noexcept nogil:
    """dst[k] = src[idx[k]] for blocks of ``blk`` bytes (constant-size copies for small blocks)."""
    cdef Py_ssize_t k
    if blk == 4:
        for k in range(count):
            memcpy(dst + 4 * k, src + 4 * idx[k], 4)
    elif blk == 8:
        for k in range(count):
            memcpy(dst + 8 * k, src + 8 * idx[k], 8)
    elif blk == 1:
        for k in range(count):
            dst[k] = src[idx[k]]
    elif blk == 2:
        for k in range(count):
            memcpy(dst + 2 * k, src + 2 * idx[k], 2)
    elif blk == 16:
        for k in range(count):
            memcpy(dst + 16 * k, src + 16 * idx[k], 16)
    elif blk == 32:
        for k in range(count):
            memcpy(dst + 32 * k, src + 32 * idx[k], 32)
    else:
        for k in range(count):
            memcpy(dst + blk * k, src + blk * idx[k], blk)


cdef object _index_array(object idx, Py_ssize_t bound, str what):
    """idx as a contiguous int64 array, every entry checked to lie in [0, bound)."""
    cdef cnp.ndarray a = np.ascontiguousarray(idx, dtype=np.int64)
    cdef const int64_t* p = <const int64_t*>cnp.PyArray_DATA(a)
    cdef Py_ssize_t k, m = cnp.PyArray_SIZE(a)
    if cnp.PyArray_NDIM(a) != 1:
        raise BufferException(f"{what}: expected a 1-D index array")
    for k in range(m):
        if p[k] < 0 or p[k] >= bound:
            raise BufferException(f"{what}: index {p[k]} out of range [0, {bound})")
    return a


cdef struct FieldState:
    char* ptr           # storage data
    Py_ssize_t n        # valid rows
    Py_ssize_t cap      # rows the storage holds
    Py_ssize_t rb       # bytes per row
    Py_ssize_t sig      # (dtype, row shape) id; 0 = uninitialised
    PyObject* pv        # padding value (owned reference)


cdef inline void _set_pv(FieldState* st, object value) noexcept:
    cdef PyObject* old = st.pv
    if old != <PyObject*>value:
        Py_INCREF(value)
        st.pv = <PyObject*>value
        Py_XDECREF(old)


cdef inline void _copy_row(char* dst, const char* src, Py_ssize_t rb) noexcept nogil:
    if rb == 4:
        memcpy(dst, src, 4)
    elif rb == 8:
        memcpy(dst, src, 8)
    elif rb == 1:
        dst[0] = src[0]
    elif rb == 32:
        memcpy(dst, src, 32)
    elif rb == 16:
        memcpy(dst, src, 16)
    else:
        memcpy(dst, src, rb)


# Incremented by every structural change of a VersionCell's dict that a BatchAppender
# watches, so that appenders can check in O(1) that nothing they depend on changed.
cdef Py_ssize_t _STRUCT_EPOCH = 0
# Incremented whenever any field's (dtype, row shape) is set or cleared.
cdef Py_ssize_t _SIG_EPOCH = 0


cdef class VersionCell:
    """Counter bumped on structural changes of a dict (keys added, removed or replaced)."""

    cdef public Py_ssize_t value
    cdef public bint watched

    def bump(self) -> None:
        """Record a structural change."""
        global _STRUCT_EPOCH
        self.value += 1
        if self.watched:
            _STRUCT_EPOCH += 1


cdef class AgentBufferField:
    """A growable typed column of rows (one per step), stored contiguously.

    The row shape and dtype are fixed by the first append (Python floats become float32;
    Python ints, bools and numpy data keep their dtype).  ``padding_value`` is what
    sequential ``get_batch`` multiplies the last row by to pad a partial sequence; every
    ``append`` overwrites it (default 0).
    """

    cdef cnp.ndarray _data
    cdef cnp.ndarray _spare     # storage kept by reset_field for reuse (nobody else sees it)
    cdef FieldState st
    cdef Py_ssize_t _itemsize
    cdef object _dtype
    cdef tuple _row_shape
    cdef int _cat
    cdef int _type_num
    cdef int _ndim
    cdef int _fast
    cdef cnp.npy_intp _dims[MAXD]
    cdef public object name

    def __cinit__(self):
        self._data = None
        self._spare = None
        self.st.ptr = NULL
        self.st.n = 0
        self.st.cap = 0
        self.st.sig = 0
        self._dtype = None
        self._row_shape = None
        Py_INCREF(_ZERO)
        self.st.pv = <PyObject*>_ZERO
        self.name = None

    def __dealloc__(self):
        Py_XDECREF(self.st.pv)
        self.st.pv = NULL

    @property
    def padding_value(self):
        """Multiplier of the last row for sequential padding (set by every append)."""
        return <object>self.st.pv

    @padding_value.setter
    def padding_value(self, value):
        _set_pv(&self.st, value)

    def __init__(self, data=None, padding_value=0, name=None):
        """Optionally start with ``data`` (a sequence of rows, as for :meth:`set`)."""
        _set_pv(&self.st, padding_value)
        self.name = name
        if data is not None:
            self.set(data)

    # ------------------------------------------------------------------ internals
    cdef str _label(self):
        return "<unnamed>" if self.name is None else repr(self.name)

    cdef int _init(self, object dtype, tuple shape) except -1:
        global _SIG_EPOCH
        cdef Py_ssize_t rb, i
        _SIG_EPOCH += 1
        self._dtype = dtype
        self._row_shape = shape
        self._cat = _cat_of(dtype)
        self._type_num = (<cnp.dtype>dtype).type_num
        self._itemsize = dtype.itemsize
        rb = self._itemsize
        for d in shape:
            rb *= <Py_ssize_t>d
        self.st.rb = rb
        self._ndim = len(shape)
        if self._ndim <= MAXD:
            for i in range(self._ndim):
                self._dims[i] = shape[i]
        self.st.sig = _sig_of(dtype, shape)
        self._fast = FS_NONE
        if self._ndim == 0:
            if dtype is _F32:
                self._fast = FS_F32
            elif dtype is _F64:
                self._fast = FS_F64
            elif dtype is _I64:
                self._fast = FS_I64
            elif dtype is _BOOL:
                self._fast = FS_BOOL
        self._data = None
        self.st.ptr = NULL
        self.st.n = 0
        self.st.cap = 0
        self._take_spare()
        return 0

    cdef void _take_spare(self):
        """Reuse the storage kept by the last reset if it has this field's layout."""
        cdef cnp.ndarray spare = self._spare
        cdef int i
        if spare is None:
            return
        self._spare = None
        if (cnp.PyArray_TYPE(spare) != self._type_num
                or cnp.PyArray_NDIM(spare) != self._ndim + 1):
            return
        for i in range(self._ndim):
            if cnp.PyArray_DIMS(spare)[i + 1] != self._row_shape[i]:
                return
        self._data = spare
        self.st.ptr = <char*>cnp.PyArray_DATA(spare)
        self.st.cap = cnp.PyArray_DIMS(spare)[0]

    cdef void _init_like(self, AgentBufferField proto):
        """``_init`` with the dtype and row shape of the initialised field ``proto``."""
        global _SIG_EPOCH
        _SIG_EPOCH += 1
        self._dtype = proto._dtype
        self._row_shape = proto._row_shape
        self._cat = proto._cat
        self._type_num = proto._type_num
        self._itemsize = proto._itemsize
        self._ndim = proto._ndim
        self._dims = proto._dims
        self._fast = proto._fast
        self.st.rb = proto.st.rb
        self.st.sig = proto.st.sig
        self._data = None
        self.st.ptr = NULL
        self.st.n = 0
        self.st.cap = 0
        self._take_spare()

    cdef void _reset(self):
        """Forget rows, dtype and shape; storage nobody else references is kept for reuse."""
        global _SIG_EPOCH
        _SIG_EPOCH += 1
        if self._data is not None and _Py_REFCNT(<PyObject*>self._data) == 1:
            self._spare = self._data
        self._data = None
        self.st.ptr = NULL
        self.st.n = 0
        self.st.cap = 0
        self.st.sig = 0
        self._dtype = None
        self._row_shape = None
        self._fast = FS_NONE

    cdef cnp.ndarray _alloc(self, Py_ssize_t nrows):
        """A new uninitialised array of ``nrows`` rows of this field's dtype and shape."""
        cdef cnp.npy_intp dims[MAXND]
        cdef int i
        dims[0] = nrows
        for i in range(self._ndim):
            dims[i + 1] = self._row_shape[i]
        return <cnp.ndarray>cnp.PyArray_EMPTY(self._ndim + 1, dims, self._type_num, 0)

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self.st.n + extra
        cdef Py_ssize_t newcap, minimum
        cdef cnp.ndarray new
        if need <= self.st.cap:
            return 0
        newcap = 2 * self.st.cap
        if newcap < need:
            newcap = need
        minimum = 4096 // self.st.rb if self.st.rb > 0 else 4096
        if minimum < 8:
            minimum = 8
        if newcap < minimum:
            newcap = minimum
        new = self._alloc(newcap)
        if self.st.n:
            memcpy(cnp.PyArray_DATA(new), self.st.ptr, self.st.n * self.st.rb)
        self._data = new
        self.st.ptr = <char*>cnp.PyArray_DATA(new)
        self.st.cap = newcap
        return 0

    cdef int _replace(self, cnp.ndarray new, Py_ssize_t n) except -1:
        """Switch to ``new`` (a fresh array of this field's layout) holding ``n`` rows."""
        self._data = new
        self.st.ptr = <char*>cnp.PyArray_DATA(new)
        self.st.n = n
        self.st.cap = new.shape[0]
        return 0

    cdef inline int _push(self, const void* src) except -1:
        if self.st.n == self.st.cap:
            self._reserve(1)
        memcpy(self.st.ptr + self.st.n * self.st.rb, src, self.st.rb)
        self.st.n += 1
        return 0

    cdef inline bint _same_row_layout(self, cnp.ndarray arr):
        """True if ``arr`` is one contiguous row of exactly this field's dtype and shape."""
        cdef int i
        cdef cnp.npy_intp* dims
        if <void*>cnp.PyArray_DESCR(arr) != <void*>self._dtype:
            return False
        if cnp.PyArray_NDIM(arr) != self._ndim or self._ndim > MAXD:
            return False
        dims = cnp.PyArray_DIMS(arr)
        for i in range(self._ndim):
            if dims[i] != self._dims[i]:
                return False
        return cnp.PyArray_IS_C_CONTIGUOUS(arr)

    cdef object _mismatch(self, tuple shape, object dtype, str context):
        return BufferException(
            f"Field {self._label()}{context}: cannot add a row of shape {shape} and dtype {dtype} "
            f"to a field whose rows have shape {self._row_shape} and dtype {self._dtype}"
        )

    cdef cnp.ndarray _prepare(self, object x, bint single, bint fresh, str context=""):
        """Convert ``x`` to a contiguous array of rows (or one row) ready for ``_commit``.

        Checks shape and dtype category against the field (unless ``fresh`` or the field is
        uninitialised) and never modifies the field.
        """
        cdef bint py = not _numpy_origin(x)
        arr = _asarray(x, self._label())
        if not single:
            if arr.ndim == 0:
                raise BufferException(
                    f"Field {self._label()}{context}: expected a sequence of rows, got a scalar"
                )
            if arr.shape[0] == 0:
                return arr
        shape = arr.shape if single else arr.shape[1:]
        canon = _canonical(arr.dtype)
        if canon is None:
            raise BufferException(
                f"Field {self._label()}{context}: unsupported dtype {arr.dtype} (row shape "
                f"{shape}); rows must be bool, integer, float or complex"
            )
        if fresh or self.st.sig == 0:
            target = _F32 if (py and canon is _F64) else canon
        else:
            if shape != self._row_shape or _cat_of(canon) != self._cat:
                raise self._mismatch(shape, arr.dtype, context)
            target = self._dtype
        if arr.dtype != target:
            arr = arr.astype(target)
        return _contig(arr)

    cdef int _commit(self, cnp.ndarray arr, bint single) except -1:
        """Append the rows of a prepared array (initialising the field if needed)."""
        cdef Py_ssize_t nrows = 1 if single else cnp.PyArray_DIMS(arr)[0]
        cdef tuple shape
        if nrows == 0:
            return 0
        if self.st.sig == 0:
            shape = (<object>arr).shape
            self._init(_canonical(arr.dtype), shape if single else shape[1:])
        self._reserve(nrows)
        memcpy(self.st.ptr + self.st.n * self.st.rb, cnp.PyArray_DATA(arr), nrows * self.st.rb)
        self.st.n += nrows
        return 0

    cdef cnp.ndarray _pad_row(self):
        """One row (shape ``(1, *row_shape)``) equal to ``last_row * padding_value``.

        C loops for the common cases give numpy's exact results; anything else goes
        through numpy itself.
        """
        cdef cnp.ndarray out
        cdef char* o
        cdef const char* last = self.st.ptr + (self.st.n - 1) * self.st.rb
        cdef Py_ssize_t k, cnt
        cdef double d = 0.0
        cdef object pv = <object>self.st.pv
        cdef int mode = _pv_mode(pv, &d)
        cnt = self.st.rb // self._itemsize if self._itemsize > 0 else 0
        if mode != 0:
            if (self._type_num == cnp.NPY_FLOAT and (isinf(d) or fabs(d) <= FLT_MAX)
                    and <double>(<float>d) == d):
                out = self._alloc(1)
                o = <char*>cnp.PyArray_DATA(out)
                for k in range(cnt):
                    (<float*>o)[k] = <float>((<const float*>last)[k] * d)
                return out
            if self._type_num == cnp.NPY_DOUBLE:
                out = self._alloc(1)
                o = <char*>cnp.PyArray_DATA(out)
                for k in range(cnt):
                    (<double*>o)[k] = (<const double*>last)[k] * d
                return out
            if self._type_num == cnp.NPY_BOOL and (mode == 2 or isfinite(d)):
                out = self._alloc(1)
                o = <char*>cnp.PyArray_DATA(out)
                for k in range(cnt):
                    o[k] = 1 if (last[k] != 0 and d != 0.0) else 0
                return out
            if self._cat == CAT_INT and mode == 2 and (d == 0.0 or d == 1.0):
                out = self._alloc(1)
                o = <char*>cnp.PyArray_DATA(out)
                if d == 0.0:
                    memset(o, 0, self.st.rb)
                else:
                    memcpy(o, last, self.st.rb)
                return out
        try:
            with np.errstate(all="ignore"):
                res = (self._data[self.st.n - 1:self.st.n] * pv).astype(self._dtype)
        except (OverflowError, TypeError, ValueError) as e:
            raise BufferException(
                f"Field {self._label()}: cannot pad rows of dtype {self._dtype} with padding "
                f"value {pv!r}: {e}"
            ) from e
        if res.shape != (1,) + self._row_shape:
            raise BufferException(
                f"Field {self._label()}: padding value {pv!r} changes the row "
                f"shape {self._row_shape} to {res.shape[1:]}"
            )
        return np.ascontiguousarray(res)

    cdef object _view(self, Py_ssize_t start, Py_ssize_t stop):
        """Read-only view of rows [start, stop) (an empty float32 array if uninitialised)."""
        cdef cnp.ndarray v
        if self._data is None:
            v = np.empty((0,) if self.st.sig == 0 else (0,) + self._row_shape,
                         _F32 if self.st.sig == 0 else self._dtype)
        else:
            v = self._data[start:stop]
        cnp.PyArray_CLEARFLAGS(v, cnp.NPY_ARRAY_WRITEABLE)
        return v

    # ------------------------------------------------------------------ public API
    @property
    def dtype(self):
        """The field's numpy dtype (None until the first row arrives)."""
        return self._dtype

    @property
    def row_shape(self):
        """The shape of one row (None until the first row arrives)."""
        return self._row_shape

    @property
    def capacity(self) -> int:
        """Rows the current storage can hold before it grows."""
        return self.st.cap

    @property
    def array(self):
        """The valid rows ``[len, *row_shape]`` as a read-only view (no copy)."""
        return self._view(0, self.st.n)

    def __array__(self, dtype=None, copy=None):
        a = self._view(0, self.st.n)
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError("converting the field's dtype requires a copy")
            return a.astype(dtype)
        if copy:
            return a.copy()
        return a

    def __len__(self) -> int:
        return self.st.n

    def __getitem__(self, idx):
        return self._view(0, self.st.n)[idx]

    def __iter__(self):
        return iter(self._view(0, self.st.n))

    def __repr__(self) -> str:
        return (f"AgentBufferField(name={self.name!r}, len={self.st.n}, "
                f"row_shape={self._row_shape}, dtype={self._dtype}, "
                f"padding_value={self.padding_value!r})")

    def __reduce__(self):
        data = None if self.st.sig == 0 else np.array(self._view(0, self.st.n))
        return (_rebuild_field, (data, self._dtype, self._row_shape, self.padding_value, self.name))

    def append(self, element, padding_value=0) -> None:
        """Append one row and set :attr:`padding_value`."""
        cdef cnp.ndarray arr
        cdef float f
        cdef double dv
        cdef long long ll
        cdef int overflow = 0
        cdef char b
        if self.st.sig != 0:
            if cnp.PyArray_CheckExact(element):
                arr = <cnp.ndarray>element
                if self._same_row_layout(arr):
                    self._push(cnp.PyArray_DATA(arr))
                    _set_pv(&self.st, padding_value)
                    return
            elif self._fast != FS_NONE:
                t = type(element)
                if t is float:
                    dv = PyFloat_AS_DOUBLE(element)
                    if self._fast == FS_F32:
                        f = <float>dv
                        self._push(&f)
                        _set_pv(&self.st, padding_value)
                        return
                    if self._fast == FS_F64:
                        self._push(&dv)
                        _set_pv(&self.st, padding_value)
                        return
                elif t is int and self._fast == FS_I64:
                    ll = PyLong_AsLongLongAndOverflow(element, &overflow)
                    if overflow == 0:
                        self._push(&ll)
                        _set_pv(&self.st, padding_value)
                        return
                elif t is bool and self._fast == FS_BOOL:
                    b = 1 if element is True else 0
                    self._push(&b)
                    _set_pv(&self.st, padding_value)
                    return
        arr = self._prepare(element, True, False)
        self._commit(arr, True)
        _set_pv(&self.st, padding_value)

    def extend(self, rows) -> None:
        """Append every row of ``rows`` (split along the first dimension)."""
        self._commit(self._prepare(rows, False, False), False)

    def set(self, rows) -> None:
        """Replace the contents with ``rows``; dtype and row shape are taken afresh from them."""
        arr = self._prepare(rows, False, True)
        self._reset()
        self._commit(arr, False)

    def reserve(self, n_rows: int) -> None:
        """Make room for ``n_rows`` more rows without further reallocation."""
        if n_rows > 0 and self.st.sig != 0:
            self._reserve(n_rows)

    def reset_field(self) -> None:
        """Remove every row; the next append fixes the dtype and row shape again."""
        self._reset()

    def get_batch(self, batch_size=None, training_length=1, bint sequential=True, bint pad_end=False):
        """Rows for a (sequence) batch as one flat array ``[rows, *row_shape]``.

        Sequential: the last ``batch_size`` sequences of ``training_length`` rows; when that is
        more than the data, every row is returned, preceded by ``L - len % L`` padding rows
        (last row × ``padding_value``) — or followed by them with ``pad_end`` (later ML-Agents:
        a sequence then starts at a real row, whose stored recurrent memory is its initial
        state).  Non-sequential: ``batch_size`` overlapping windows of ``training_length`` rows
        ending at the last rows, concatenated.  ``training_length=None`` means 1; requests
        larger than the data raise BufferException.
        """
        cdef Spec s
        cdef cnp.ndarray out, pad
        _make_spec(self.st.n, batch_size, training_length, sequential, &s, pad_end)
        if self.st.sig == 0:
            return np.empty((0,), _F32)
        out = self._alloc(_spec_rows(&s))
        if s.npad:
            pad = self._pad_row()
            _write_spec(self.st.ptr, self.st.rb, &s, <const char*>cnp.PyArray_DATA(pad),
                        <char*>cnp.PyArray_DATA(out))
        else:
            _write_spec(self.st.ptr, self.st.rb, &s, NULL, <char*>cnp.PyArray_DATA(out))
        return out

    def copy_rows(self, start, end):
        """A new contiguous array of rows ``[start:end]`` (Python slice semantics)."""
        cdef Py_ssize_t a, b, step
        cdef cnp.ndarray out
        if self.st.sig == 0:
            return np.empty((0,), _F32)
        a, b, step = slice(start, end).indices(self.st.n)
        if b < a:
            b = a
        out = self._alloc(b - a)
        memcpy(cnp.PyArray_DATA(out), self.st.ptr + a * self.st.rb, (b - a) * self.st.rb)
        return out

    def take_rows(self) -> "AgentBufferField":
        """A new field holding this one's rows (copied), padding value and name; this one is
        then emptied (its storage kept for reuse). ``from_array(copy_rows(...))`` in one call."""
        cdef AgentBufferField f = AgentBufferField.__new__(AgentBufferField)
        cdef cnp.ndarray rows
        _set_pv(&f.st, <object>self.st.pv)
        f.name = self.name
        if self.st.sig != 0 and self.st.n > 0:
            f._init(self._dtype, self._row_shape)
            rows = self._alloc(self.st.n)
            memcpy(cnp.PyArray_DATA(rows), self.st.ptr, self.st.n * self.st.rb)
            f._replace(rows, self.st.n)
        self._reset()
        return f

    def keep_last(self, max_length: int) -> None:
        """Keep only the newest ``max_length`` rows (no-op if there are not more)."""
        cdef Py_ssize_t m = max_length
        cdef cnp.ndarray new
        if m < 0:
            raise BufferException(f"max_length must be non-negative, got {m}")
        if self.st.n <= m:
            return
        new = self._alloc(m)
        memcpy(cnp.PyArray_DATA(new), self.st.ptr + (self.st.n - m) * self.st.rb,
               m * self.st.rb)
        self._replace(new, m)

    @staticmethod
    def from_array(arr, padding_value=0, name=None) -> "AgentBufferField":
        """A field owning ``arr`` (rows along the first axis) without copying when possible."""
        cdef AgentBufferField f = AgentBufferField.__new__(AgentBufferField)
        f.padding_value = padding_value
        f.name = name
        f._adopt(arr)
        return f

    cdef int _adopt(self, object arr) except -1:
        cdef cnp.ndarray a = np.asarray(arr)
        if a.ndim == 0:
            raise BufferException(
                f"Field {self._label()}: expected a sequence of rows, got a scalar"
            )
        canon = _canonical(a.dtype)
        if canon is None:
            raise BufferException(f"Field {self._label()}: unsupported dtype {a.dtype}")
        if a.dtype != canon:
            a = a.astype(canon)
        a = np.ascontiguousarray(a)
        self._reset()
        if a.shape[0] == 0:
            return 0
        self._init(canon, (<object>a).shape[1:])
        if <void*>cnp.PyArray_DESCR(a) != <void*>canon:
            a = a.view(canon)
        self._replace(a, a.shape[0])
        return 0


def _rebuild_field(data, dtype, row_shape, padding_value, name) -> AgentBufferField:
    """Unpickle helper for AgentBufferField."""
    f = AgentBufferField(padding_value=padding_value, name=name)
    if data is not None:
        if len(data):
            f._adopt(data)
        else:
            (<AgentBufferField>f)._init(dtype, row_shape)
    return f


# ---------------------------------------------------------------------- multi-field operations
def append_fields(list fields, list values, list padding_values, bint single,
                  str context="") -> None:
    """Append ``values[k]`` (one row if ``single`` else rows) to ``fields[k]`` for every k.

    All values are converted and checked first, so an error leaves every field unchanged.
    ``padding_values`` (one per field, or an empty list) sets each field's padding value.
    """
    cdef Py_ssize_t k, nf = len(fields)
    cdef AgentBufferField f
    if len(values) != nf:
        raise BufferException("append_fields: one value per field is required")
    prepared = []
    for k in range(nf):
        f = <AgentBufferField?>fields[k]
        prepared.append(f._prepare(values[k], single, False, context))
    for k in range(nf):
        f = <AgentBufferField>fields[k]
        f._commit(<cnp.ndarray>prepared[k], single)
        if padding_values:
            f.padding_value = padding_values[k]


def shuffle_fields(list fields, perm, Py_ssize_t sequence_length) -> None:
    """Reorder the whole sequences of every field by ``perm`` (the same for all fields).

    Rows past the last whole sequence stay at the end, in order.  Every field must hold the
    same number of rows ``n`` and ``perm`` must index the ``n // sequence_length`` sequences.
    """
    cdef AgentBufferField f
    cdef cnp.ndarray idx, new
    cdef Py_ssize_t n, s, L = sequence_length, tail
    if L < 1:
        raise BufferException(f"sequence_length must be at least 1, got {L}")
    if not fields:
        return
    n = len(fields[0])
    for f in fields:
        if f.st.n != n:
            raise BufferException("Unable to shuffle if the fields are not of same length")
    s = n // L
    idx = _index_array(perm, s, "shuffle")
    if idx.shape[0] != s:
        raise BufferException(f"shuffle: expected a permutation of {s} sequences")
    if n == 0:
        return
    tail = n - s * L
    for f in fields:
        new = f._alloc(n)
        _gather(<char*>cnp.PyArray_DATA(new), f.st.ptr, <const int64_t*>cnp.PyArray_DATA(idx),
                s, L * f.st.rb)
        if tail:
            memcpy(<char*>cnp.PyArray_DATA(new) + s * L * f.st.rb, f.st.ptr + s * L * f.st.rb,
                   tail * f.st.rb)
        f._replace(new, n)


def gather_sequences(list fields, seq_index, Py_ssize_t sequence_length) -> list:
    """New arrays holding, per field, the sequences ``seq_index`` (each ``sequence_length`` rows).

    Sequence ``i`` is rows ``[i*L, (i+1)*L)``; indices may repeat.
    """
    cdef AgentBufferField f
    cdef cnp.ndarray idx, out
    cdef Py_ssize_t L = sequence_length, count, n
    if L < 1:
        raise BufferException(f"sequence_length must be at least 1, got {L}")
    if not fields:
        return []
    n = len(fields[0])
    for f in fields:
        if f.st.n != n:
            raise BufferException("Unable to sample if the fields are not of same length")
    idx = _index_array(seq_index, n // L, "sample")
    count = idx.shape[0]
    result = []
    for f in fields:
        if f.st.sig == 0:
            result.append(np.empty((0,), _F32))
            continue
        out = f._alloc(count * L)
        _gather(<char*>cnp.PyArray_DATA(out), f.st.ptr, <const int64_t*>cnp.PyArray_DATA(idx),
                count, L * f.st.rb)
        result.append(out)
    return result


cdef str _unequal(list keys, object agent_id):
    return f"The length of the fields {keys} for agent {agent_id} where not of same length"


def append_update(object dst, object src, object keys, object agent_id, object batch_size,
                  object training_length, bint pad_end=False) -> None:
    """Extend ``dst[key]`` with ``src[key].get_batch(batch_size, training_length, pad_end=pad_end)``
    for each key.

    The copy goes straight from field to field.  Lengths, batch request and dtypes/shapes
    are all checked before anything is written.
    """
    cdef list klist = list(keys)
    cdef Py_ssize_t nk = len(klist), j, n, total, rb
    cdef Spec s
    cdef AgentBufferField sf, df
    cdef cnp.ndarray pad
    cdef char* padp
    if nk >= 2:
        for key in klist:
            if key not in src:
                raise BufferException(_unequal(klist, agent_id))
    if nk == 0:
        return
    srcs = [src[key] for key in klist]
    n = len(srcs[0])
    for j in range(nk):
        sf = <AgentBufferField?>srcs[j]
        if sf.st.n != n:
            raise BufferException(_unequal(klist, agent_id))
    _make_spec(n, batch_size, training_length, True, &s, pad_end)
    total = _spec_rows(&s)
    casts = [False] * nk
    for j in range(nk):
        sf = <AgentBufferField>srcs[j]
        existing = dict.get(dst, klist[j])
        if existing is None or total == 0 or sf.st.sig == 0:
            continue
        df = <AgentBufferField?>existing
        if df.st.sig == 0 or df.st.sig == sf.st.sig:
            continue
        if df._cat == sf._cat and df._row_shape == sf._row_shape:
            casts[j] = True
        else:
            raise df._mismatch(sf._row_shape, sf._dtype, f" (from agent {agent_id!r})")
    staged = [None] * nk
    for j in range(nk):
        sf = <AgentBufferField>srcs[j]
        if total == 0 or sf.st.sig == 0:
            continue
        if casts[j]:
            df = <AgentBufferField>dict.get(dst, klist[j])
            staged[j] = sf.get_batch(batch_size, training_length, True, pad_end).astype(df._dtype)
        elif s.npad:
            staged[j] = sf._pad_row()
    dsts = [dst[key] for key in klist]
    if total == 0:
        return
    for j in range(nk):
        sf = <AgentBufferField>srcs[j]
        df = <AgentBufferField>dsts[j]
        if sf.st.sig == 0:
            continue
        if casts[j]:
            df._commit(<cnp.ndarray>staged[j], False)
            continue
        if df.st.sig == 0:
            df._init(sf._dtype, sf._row_shape)
        padp = NULL
        if s.npad:
            pad = <cnp.ndarray>staged[j]
            padp = <char*>cnp.PyArray_DATA(pad)
        df._reserve(total)
        rb = df.st.rb
        _write_spec(sf.st.ptr, rb, &s, padp, df.st.ptr + df.st.n * rb)
        df.st.n += total


cdef class BatchAppender:
    """Appends one row per agent to the same fields of many AgentBuffers.

    Built once for a (agent ids, field names) pair; it holds the target fields (and pointers
    to their hot state) and the version cells of the Buffer and of every AgentBuffer, so it
    knows when it is stale.
    """

    cdef tuple keys
    cdef tuple ids
    cdef Py_ssize_t na
    cdef Py_ssize_t nf
    cdef list cols          # cols[j * na + i]: field keys[j] of agent ids[i]
    cdef FieldState** states
    cdef list cells
    cdef VersionCell bcell
    cdef Py_ssize_t bval
    cdef Py_ssize_t* cvals
    cdef Py_ssize_t struct_epoch   # _STRUCT_EPOCH when last found valid
    cdef Py_ssize_t sig_epoch      # _SIG_EPOCH when every column last matched its array
    cdef list descrs        # per field: dtype of the last array seen (fast-path check)
    cdef list rowshapes
    cdef Py_ssize_t* sigs
    cdef Py_ssize_t* rbs
    cdef int* ndims
    cdef cnp.npy_intp* dims  # per field: MAXD + 1 dims of the last array seen

    def __cinit__(self, object buffer, tuple ids, tuple keys):
        cdef Py_ssize_t i, j
        cdef AgentBufferField f
        self.states = NULL
        self.cvals = NULL
        self.sigs = NULL
        self.rbs = NULL
        self.ndims = NULL
        self.dims = NULL
        self.ids = ids
        self.keys = keys
        self.na = len(ids)
        self.nf = len(keys)
        missing_ids = [a for a in dict.fromkeys(ids) if a not in buffer]
        if missing_ids:
            buffer._create_agents(missing_ids)
        agents = [buffer[a] for a in ids]
        for ab in agents:
            if not isinstance(ab, dict):
                raise BufferException(f"append_batch: {type(ab).__name__} is not an AgentBuffer")
            missing = [k for k in keys if k not in ab]
            if missing:
                for k in missing:
                    f = AgentBufferField.__new__(AgentBufferField)
                    f.name = k
                    dict.__setitem__(ab, k, f)
                ab._changed()
        self.cols = []
        for j in range(self.nf):
            for i in range(self.na):
                self.cols.append(<AgentBufferField?>dict.__getitem__(agents[i], keys[j]))
        self.cells = [<VersionCell?>ab._vc for ab in agents]
        self.bcell = <VersionCell?>buffer._vc
        self.bval = self.bcell.value
        self.states = <FieldState**>malloc(max(self.na * self.nf, 1) * sizeof(FieldState*))
        self.cvals = <Py_ssize_t*>malloc(max(self.na, 1) * sizeof(Py_ssize_t))
        self.sigs = <Py_ssize_t*>malloc(max(self.nf, 1) * sizeof(Py_ssize_t))
        self.rbs = <Py_ssize_t*>malloc(max(self.nf, 1) * sizeof(Py_ssize_t))
        self.ndims = <int*>malloc(max(self.nf, 1) * sizeof(int))
        self.dims = <cnp.npy_intp*>malloc(max(self.nf, 1) * (MAXD + 1) * sizeof(cnp.npy_intp))
        if not (self.states and self.cvals and self.sigs and self.rbs and self.ndims and self.dims):
            raise MemoryError()
        for i in range(self.na * self.nf):
            f = <AgentBufferField>self.cols[i]
            self.states[i] = &f.st
        for i in range(self.na):
            self.cvals[i] = (<VersionCell>self.cells[i]).value
            (<VersionCell>self.cells[i]).watched = True
        self.bcell.watched = True
        self.struct_epoch = _STRUCT_EPOCH
        self.sig_epoch = -1
        self.descrs = [None] * self.nf
        self.rowshapes = [None] * self.nf
        for j in range(self.nf):
            self.ndims[j] = -1

    def __dealloc__(self):
        free(self.states)
        free(self.cvals)
        free(self.sigs)
        free(self.rbs)
        free(self.ndims)
        free(self.dims)

    cpdef bint valid(self):
        """False once the Buffer or one of the AgentBuffers changed structure."""
        cdef Py_ssize_t i
        if self.struct_epoch == _STRUCT_EPOCH:
            return True
        if self.bcell.value != self.bval:
            return False
        for i in range(self.na):
            if (<VersionCell>self.cells[i]).value != self.cvals[i]:
                return False
        self.struct_epoch = _STRUCT_EPOCH
        return True

    cdef inline bint _matches(self, Py_ssize_t j, cnp.ndarray arr):
        cdef int i, nd = self.ndims[j]
        cdef cnp.npy_intp* d
        cdef cnp.npy_intp* c
        if <void*>cnp.PyArray_DESCR(arr) != <void*>self.descrs[j] or cnp.PyArray_NDIM(arr) != nd:
            return False
        d = cnp.PyArray_DIMS(arr)
        c = self.dims + j * (MAXD + 1)
        for i in range(nd):
            if d[i] != c[i]:
                return False
        return cnp.PyArray_IS_C_CONTIGUOUS(arr)

    cdef cnp.ndarray _prepare(self, Py_ssize_t j, object x):
        cdef int i
        key = self.keys[j]
        cdef bint py = not _numpy_origin(x)
        arr = _asarray(x, repr(key))
        if arr.ndim == 0 or arr.shape[0] != self.na:
            raise BufferException(
                f"append_batch: field {key!r} has shape {arr.shape}; expected one row per agent "
                f"({self.na} rows) along the first dimension"
            )
        canon = _canonical(arr.dtype)
        if canon is None:
            raise BufferException(
                f"append_batch: field {key!r} has unsupported dtype {arr.dtype}; rows must be "
                f"bool, integer, float or complex"
            )
        if py and canon is _F64:
            canon = _F32
        if arr.dtype != canon:
            arr = arr.astype(canon)
        arr = np.ascontiguousarray(arr)
        if <void*>cnp.PyArray_DESCR(arr) != <void*>canon:
            arr = arr.view(canon)
        rowshape = arr.shape[1:]
        self.sig_epoch = -1
        self.descrs[j] = canon
        self.rowshapes[j] = rowshape
        self.sigs[j] = _sig_of(canon, rowshape)
        self.rbs[j] = canon.itemsize * int(np.prod(rowshape, dtype=np.int64))
        if arr.ndim <= MAXD + 1:
            self.ndims[j] = arr.ndim
            for i in range(arr.ndim):
                self.dims[j * (MAXD + 1) + i] = arr.shape[i]
        else:
            self.ndims[j] = -1
        return arr

    cdef int _check_columns(self, list arrs) except -1:
        """Raise if a field cannot take its rows; uninitialised fields and casts are fine."""
        cdef Py_ssize_t i, j
        cdef AgentBufferField c
        for j in range(self.nf):
            arr = arrs[j]
            cat = _cat_of(arr.dtype)
            for i in range(self.na):
                c = <AgentBufferField>self.cols[j * self.na + i]
                if c.st.sig == self.sigs[j] or c.st.sig == 0:
                    continue
                if c._cat != cat or c._row_shape != self.rowshapes[j]:
                    raise c._mismatch(self.rowshapes[j], arr.dtype,
                                      f" of agent {self.ids[i]!r} (append_batch)")
        return 0

    cdef int _append_slow(self, Py_ssize_t k, Py_ssize_t j, object arr, Py_ssize_t i,
                          object pv) except -1:
        """Append row ``i`` of ``arr`` to column ``k``: initialise, grow or cast as needed."""
        cdef AgentBufferField c = <AgentBufferField>self.cols[k]
        cdef AgentBufferField proto
        if c.st.sig == 0:
            proto = <AgentBufferField>self.cols[j * self.na]
            if proto.st.sig == self.sigs[j] and proto is not c:
                c._init_like(proto)
            else:
                c._init(self.descrs[j], self.rowshapes[j])
        if c.st.sig != self.sigs[j]:
            c._commit(_contig(arr[i:i + 1].astype(c._dtype)), False)
        else:
            c._push(<const char*>cnp.PyArray_DATA(<cnp.ndarray>arr) + i * self.rbs[j])
        _set_pv(&c.st, pv)
        return 0

    cpdef append(self, object fields, object padding_values):
        """Append row ``i`` of ``fields[key]`` to agent ``ids[i]``'s field ``key``."""
        cdef Py_ssize_t i, j, k, na = self.na, rb, sig
        cdef list arrs = [None] * self.nf
        cdef const char* src
        cdef FieldState* st
        cdef FieldState** states = self.states
        cdef PyObject* pvp
        cdef bint slow = False
        cdef bint fdict = type(fields) is dict, pdict = type(padding_values) is dict
        for j in range(self.nf):
            x = (<dict>fields)[self.keys[j]] if fdict else fields[self.keys[j]]
            if cnp.PyArray_CheckExact(x) and self._matches(j, <cnp.ndarray>x):
                arrs[j] = x
            else:
                arrs[j] = self._prepare(j, x)
        if self.sig_epoch != _SIG_EPOCH:
            for j in range(self.nf):
                sig = self.sigs[j]
                for i in range(na):
                    if states[j * na + i].sig != sig:
                        slow = True
                        break
                if slow:
                    break
            if slow:
                self._check_columns(arrs)
            else:
                self.sig_epoch = _SIG_EPOCH
        for j in range(self.nf):
            if padding_values is None:
                pv = _ZERO
            elif pdict:
                pv = (<dict>padding_values).get(self.keys[j], _ZERO)
            else:
                pv = padding_values.get(self.keys[j], _ZERO)
            pvp = <PyObject*>pv
            arr = arrs[j]
            src = <const char*>cnp.PyArray_DATA(<cnp.ndarray>arr)
            rb = self.rbs[j]
            sig = self.sigs[j]
            for i in range(na):
                k = j * na + i
                st = states[k]
                if st.sig != sig or st.n == st.cap:
                    self._append_slow(k, j, arr, i, pv)
                    continue
                _copy_row(st.ptr + st.n * rb, src + i * rb, rb)
                st.n += 1
                if st.pv != pvp:
                    _set_pv(st, pv)


cdef bint _same_ids(object agent_ids, tuple ids):
    """True if ``agent_ids`` (a list or tuple) holds the same ids as ``ids``."""
    cdef Py_ssize_t i, n = len(ids)
    cdef list lst
    cdef tuple tup
    if type(agent_ids) is list:
        lst = <list>agent_ids
        if len(lst) != n:
            return False
        for i in range(n):
            a = lst[i]
            b = ids[i]
            if a is not b and not (a == b):
                return False
        return True
    if type(agent_ids) is tuple:
        tup = <tuple>agent_ids
        if tup is ids:
            return True
        if len(tup) != n:
            return False
        for i in range(n):
            a = tup[i]
            b = ids[i]
            if a is not b and not (a == b):
                return False
        return True
    return False


def buffer_append_batch(object buffer, object agent_ids, object fields,
                        object padding_values) -> None:
    """Implementation of :meth:`kerasrl.buffer.Buffer.append_batch`.

    The BatchAppender used last is tried first (ids compared in place); otherwise appenders
    are cached per (agent ids, field names) until the buffer's structure changes.
    """
    cdef BatchAppender app
    keys = tuple(fields)
    last = buffer._last_appender
    if last is not None:
        app = <BatchAppender>last
        ids_seq = agent_ids.tolist() if isinstance(agent_ids, np.ndarray) else agent_ids
        if app.keys == keys and _same_ids(ids_seq, app.ids) and app.valid():
            app.append(fields, padding_values)
            return
    if type(agent_ids) is tuple:
        ids = agent_ids
    elif type(agent_ids) is list:
        ids = tuple(<list>agent_ids)
    elif isinstance(agent_ids, np.ndarray):
        ids = tuple(agent_ids.tolist())
    else:
        ids = tuple(agent_ids)
    cache = buffer._appenders
    ck = (ids, keys)
    app = cache.get(ck)
    if app is not None and app.valid():
        app.append(fields, padding_values)
        buffer._last_appender = app
        return
    new_agents = [a for a in dict.fromkeys(ids) if a not in buffer]
    new_fields = [(a, k) for a in dict.fromkeys(ids) if a in buffer
                  for k in keys if k not in dict.__getitem__(buffer, a)]
    app = BatchAppender(buffer, ids, keys)
    try:
        app.append(fields, padding_values)
    except BaseException:
        for a, k in new_fields:
            dict.__getitem__(buffer, a).pop(k, None)
        for a in new_agents:
            buffer.pop(a, None)
        raise
    cache = buffer._appenders
    if len(cache) >= 64:
        cache.clear()
    cache[ck] = app
    buffer._last_appender = app
