/* The GPU backend's launch of a kernel with a known parameter layout, in C:
 * the argument block packed and cuLaunchKernel called without Python frames
 * in between (see workbench/backends/gpu/native_launch.py, which builds this file
 * once per machine and falls back to Python where it cannot).
 *
 * launch(function, codes, args, gx, gy, gz, bx, by, bz, shared, stream[, start, end]) -> CUresult
 *   function: the CUfunction (an int); codes: one byte per parameter, 'P' for a
 *   pointer (a device array: its .data.ptr; an int; None) or a struct module
 *   format character for a number; args: a list or tuple, checked by the caller
 *   (numbers in range for their C type: out-of-range integers wrap here, where
 *   struct would raise; a float too large for 'f' becomes inf);
 *   start, end: CUevents (ints) recorded on the stream before and after the
 *   kernel (the timing log's events, without two more calls from Python).
 * pack(codes, args) -> bytes: the argument block launch() passes (8 bytes per
 *   parameter), for tests.
 * FastCall(...): a whole wb.Kernel call, checks to timing record, in one C
 *   call for the common case; see the comment above its definition.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <float.h>

#define MAX_PARAMS 64

typedef int (*cu_launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, void *, void **, void **);
typedef int (*cu_event_record_t)(void *, void *);
static cu_launch_kernel_t cu_launch_kernel = NULL;
static cu_event_record_t cu_event_record = NULL;
static PyObject *name_data = NULL, *name_ptr = NULL;

static int pointer_of(PyObject *obj, uint64_t *out) {
    if (obj == Py_None) { *out = 0; return 0; }
    if (PyLong_Check(obj)) {
        *out = PyLong_AsUnsignedLongLong(obj);
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *data = PyObject_GetAttr(obj, name_data);
    if (data == NULL) return -1;
    PyObject *ptr = PyObject_GetAttr(data, name_ptr);
    Py_DECREF(data);
    if (ptr == NULL) return -1;
    *out = PyLong_AsUnsignedLongLong(ptr);
    Py_DECREF(ptr);
    return PyErr_Occurred() ? -1 : 0;
}

/* Pack args into slots (8 bytes each); -1 with a Python error set. */
static int pack_slots(const char *codes, Py_ssize_t count, PyObject *args, uint64_t *slots) {
    PyObject *seq = PySequence_Fast(args, "launch arguments must be a list or a tuple");
    if (seq == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != count || count > MAX_PARAMS) {
        PyErr_Format(PyExc_ValueError, "%zd launch arguments for %zd parameters",
                     PySequence_Fast_GET_SIZE(seq), count);
        Py_DECREF(seq);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < count; ++i) {
        PyObject *v = items[i];
        uint64_t *slot = &slots[i];
        *slot = 0;
        switch (codes[i]) {
        case 'P': if (pointer_of(v, slot) < 0) goto fail; break;
        case 'f': { float x = (float)PyFloat_AsDouble(v); memcpy(slot, &x, 4); break; }
        case 'd': { double x = PyFloat_AsDouble(v); memcpy(slot, &x, 8); break; }
        case 'b': { int8_t x = (int8_t)PyLong_AsLongLong(v); memcpy(slot, &x, 1); break; }
        case 'B': { uint8_t x = (uint8_t)PyLong_AsUnsignedLongLongMask(v); memcpy(slot, &x, 1); break; }
        case 'h': { int16_t x = (int16_t)PyLong_AsLongLong(v); memcpy(slot, &x, 2); break; }
        case 'H': { uint16_t x = (uint16_t)PyLong_AsUnsignedLongLongMask(v); memcpy(slot, &x, 2); break; }
        case 'i': { int32_t x = (int32_t)PyLong_AsLongLong(v); memcpy(slot, &x, 4); break; }
        case 'I': { uint32_t x = (uint32_t)PyLong_AsUnsignedLongLongMask(v); memcpy(slot, &x, 4); break; }
        case 'q': { int64_t x = (int64_t)PyLong_AsLongLong(v); memcpy(slot, &x, 8); break; }
        case 'Q': { uint64_t x = (uint64_t)PyLong_AsUnsignedLongLongMask(v); memcpy(slot, &x, 8); break; }
        case '?': { int t = PyObject_IsTrue(v); if (t < 0) goto fail; uint8_t x = (uint8_t)t; memcpy(slot, &x, 1); break; }
        default:
            PyErr_Format(PyExc_ValueError, "unknown parameter code '%c'", codes[i]);
            goto fail;
        }
        if (PyErr_Occurred()) goto fail;
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11 && nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "launch() takes 11 or 13 arguments");
        return NULL;
    }
    if (cu_launch_kernel == NULL || cu_event_record == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cuLaunchKernel was not found in libcuda");
        return NULL;
    }
    void *function = PyLong_AsVoidPtr(args[0]);
    if (function == NULL && PyErr_Occurred()) return NULL;
    char *codes;
    Py_ssize_t count;
    if (PyBytes_AsStringAndSize(args[1], &codes, &count) < 0) return NULL;
    unsigned dims[7];
    for (int i = 0; i < 7; ++i) {
        long long d = PyLong_AsLongLong(args[3 + i]);  /* (ints and NumPy integers) */
        if (d < 0 || d > 0xffffffffLL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "grid, block and shared memory must fit in 32 bits");
            return NULL;
        }
        dims[i] = (unsigned)d;
    }
    void *stream = PyLong_AsVoidPtr(args[10]);
    void *start = nargs == 13 ? PyLong_AsVoidPtr(args[11]) : NULL;
    void *end = nargs == 13 ? PyLong_AsVoidPtr(args[12]) : NULL;
    if (PyErr_Occurred()) return NULL;
    uint64_t slots[MAX_PARAMS];
    void *params[MAX_PARAMS];
    if (pack_slots(codes, count, args[2], slots) < 0) return NULL;
    for (Py_ssize_t i = 0; i < count; ++i) params[i] = &slots[i];
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    if (start != NULL) status = cu_event_record(start, stream);
    if (status == 0)
        status = cu_launch_kernel(function, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
                                  dims[6], stream, params, NULL);
    if (status == 0 && end != NULL) status = cu_event_record(end, stream);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(status);
}

static PyObject *pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "pack() takes 2 arguments");
        return NULL;
    }
    char *codes;
    Py_ssize_t count;
    if (PyBytes_AsStringAndSize(args[0], &codes, &count) < 0) return NULL;
    uint64_t slots[MAX_PARAMS];
    if (pack_slots(codes, count, args[1], slots) < 0) return NULL;
    return PyBytes_FromStringAndSize((const char *)slots, count * 8);
}

static PyObject *has_driver(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(cu_launch_kernel != NULL && cu_event_record != NULL);
}

/* ---- FastCall: a whole wb.Kernel call in one C call ----------------------
 *
 * Kernel.__call__ (workbench/core/kernel.py) hands the common call -- every
 * argument of the exact kind its parameter takes, a launch configuration seen
 * before, the current stream, the log timing by CUPTI or paused -- to this
 * object, and keeps its Python path for everything else:
 *
 *   fast(args, grid, block, shared_mem, n) -> None: launched (and logged);
 *       NotImplemented: not taken, nothing was done (the caller runs its
 *       Python path, which checks, raises or launches); an int: the launch
 *       returned this CUresult, nothing was logged (the caller raises).
 *
 * The tests each argument gets, per parameter (``checks``, built by the core
 * from the signature, the same tests as its generated Python checker):
 *   'P': (array_type, dtype): an array of exactly that type whose .dtype is
 *        (or equals) that dtype and whose ._c_contiguous is True;
 *   numbers: (low, high): a Python float, or int, of exactly that type, in range.
 * Anything else -- None, a NumPy scalar, a wrong dtype -- is not taken.
 *
 * What it reads of the core's objects (names fixed here, kept in one place):
 *   session.backend must be ``backend``; session.cell;
 *   log.enabled; when false, log.capture must be None (a launch, nothing logged);
 *   log's own __dict__ must have no "timed_launch" (a wrapper of every launch,
 *   such as the NVTX ranges of runtime/nvtx.py, which only the Python path calls);
 *   when true, log._backend must be ``backend`` and log._activity not None (timed
 *   by CUPTI: a record is appended to log.records and log._awaiting (the two
 *   deques, and log.MAX_RECORDS, are read once, when this object is made), a copy of
 *   ``template`` with the ``slots`` GRID, BLOCK, SHARED, CELL, WALL, STREAM and
 *   DEVICE (log._device) filled in; past log.MAX_RECORDS awaiting, it calls
 *   log.resolve_finished(backend), as TimingLog.timed_launch does);
 *   configs[(grid, block, shared_mem, n)] -> ((gx, gy, gz), (bx, by, bz)), the
 *   checked configuration; opted_in[0]: the dynamic shared memory allowed.
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *function;
    Py_ssize_t count;
    char codes[MAX_PARAMS];
    PyObject *array_type[MAX_PARAMS], *dtype[MAX_PARAMS];
    double flow[MAX_PARAMS], fhigh[MAX_PARAMS];
    long long ilow[MAX_PARAMS];
    unsigned long long ihigh[MAX_PARAMS];
    PyObject *configs, *opted_in, *current_stream, *session, *backend, *log, *template;
    PyObject *owner;  /* what keeps the function loaded (its module) */
    PyObject *log_dict;  /* log.__dict__ */
    PyObject *append_record, *append_awaiting;  /* log.records.append, log._awaiting.append */
    PyObject *awaiting;
    Py_ssize_t max_records;
    Py_ssize_t slots[7];
    unsigned long long taken;
} FastCall;

enum { S_GRID, S_BLOCK, S_SHARED, S_CELL, S_WALL, S_STREAM, S_DEVICE };
static PyObject *n_backend, *n_cell, *n_enabled, *n_capture, *n_log_backend, *n_activity,
                *n_records, *n_awaiting, *n_max_records, *n_resolve, *n_device, *n_append,
                *n_dtype, *n_contiguous, *n_timed_launch;

static PyObject *fast_call(FastCall *f, PyObject *const *a, size_t nargsf, PyObject *kwnames);

/* The objects a FastCall holds besides its per-argument ones (traversed and cleared alike). */
#define FAST_OBJECTS(f) &f->configs, &f->opted_in, &f->current_stream, &f->session, &f->backend, \
    &f->log, &f->template, &f->owner, &f->log_dict, &f->append_record, &f->append_awaiting, \
    &f->awaiting

static int fast_traverse(FastCall *f, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < f->count; ++i) {
        Py_VISIT(f->array_type[i]);
        Py_VISIT(f->dtype[i]);
    }
    PyObject **held[] = {FAST_OBJECTS(f)};
    for (size_t i = 0; i < sizeof held / sizeof held[0]; ++i) Py_VISIT(*held[i]);
    return 0;
}

static int fast_clear(FastCall *f) {
    for (Py_ssize_t i = 0; i < f->count; ++i) {
        Py_CLEAR(f->array_type[i]);
        Py_CLEAR(f->dtype[i]);
    }
    PyObject **held[] = {FAST_OBJECTS(f)};
    for (size_t i = 0; i < sizeof held / sizeof held[0]; ++i) Py_CLEAR(*held[i]);
    return 0;
}

static void fast_dealloc(FastCall *f) {
    PyObject_GC_UnTrack(f);
    fast_clear(f);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

/* The range of each integer code's C type. */
static int code_range(char code, long long *low, unsigned long long *high) {
    switch (code) {
    case 'b': *low = INT8_MIN; *high = INT8_MAX; return 1;
    case 'B': *low = 0; *high = UINT8_MAX; return 1;
    case 'h': *low = INT16_MIN; *high = INT16_MAX; return 1;
    case 'H': *low = 0; *high = UINT16_MAX; return 1;
    case 'i': *low = INT32_MIN; *high = INT32_MAX; return 1;
    case 'I': *low = 0; *high = UINT32_MAX; return 1;
    case 'q': *low = INT64_MIN; *high = INT64_MAX; return 1;
    case 'Q': *low = 0; *high = UINT64_MAX; return 1;
    default: return 0;
    }
}

/* FastCall(function, codes, checks, configs, opted_in, current_stream, session,
 *          backend, log, template, slots, owner): function is the CUfunction (an
 *          int), kept loaded by owner; the rest as the comment above says. */
static PyObject *fast_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *function, *codes, *checks, *configs, *opted_in, *current_stream, *session, *backend,
             *log, *template, *slots, *owner;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "FastCall takes its arguments by position");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OSO!O!O!OOOOO!O!O:FastCall", &function, &codes, &PyTuple_Type, &checks,
                          &PyDict_Type, &configs, &PyList_Type, &opted_in, &current_stream, &session,
                          &backend, &log, &PyList_Type, &template, &PyTuple_Type, &slots, &owner))
        return NULL;
    void *function_ptr = PyLong_AsVoidPtr(function);
    if (function_ptr == NULL && PyErr_Occurred()) return NULL;
    Py_ssize_t count = PyBytes_GET_SIZE(codes);
    if (count > MAX_PARAMS || PyTuple_GET_SIZE(checks) != count || PyTuple_GET_SIZE(slots) != 7) {
        PyErr_SetString(PyExc_ValueError, "FastCall: one check per parameter (at most 64), seven slots");
        return NULL;
    }
    FastCall *f = (FastCall *)type->tp_alloc(type, 0);
    if (f == NULL) return NULL;
    f->vectorcall = (vectorcallfunc)fast_call;
    f->function = function_ptr;
    const char *c = PyBytes_AS_STRING(codes);
    long long least;
    unsigned long long most;
    for (Py_ssize_t i = 0; i < count; ++i) {
        PyObject *check = PyTuple_GET_ITEM(checks, i);
        f->codes[i] = c[i];
        f->count = i + 1;  /* (what dealloc releases) */
        if (c[i] == 'P') {
            PyObject *array_type, *dtype;
            if (!PyArg_ParseTuple(check, "OO", &array_type, &dtype)) goto fail;
            Py_INCREF(array_type); f->array_type[i] = array_type;
            Py_INCREF(dtype); f->dtype[i] = dtype;
        } else if (c[i] == 'f' || c[i] == 'd') {
            if (!PyArg_ParseTuple(check, "dd", &f->flow[i], &f->fhigh[i])) goto fail;
            double top = c[i] == 'f' ? (double)FLT_MAX : DBL_MAX;
            if (!(-top <= f->flow[i] && f->fhigh[i] <= top)) {
                PyErr_Format(PyExc_ValueError, "FastCall: the range of parameter %zd is wider than "
                             "its C type '%c' holds", i, c[i]);
                goto fail;
            }
        } else if (code_range(c[i], &least, &most)) {
            PyObject *low, *high;
            if (!PyArg_ParseTuple(check, "O!O!", &PyLong_Type, &low, &PyLong_Type, &high)) goto fail;
            f->ilow[i] = PyLong_AsLongLong(low);
            f->ihigh[i] = PyLong_AsUnsignedLongLong(high);
            if (PyErr_Occurred() || f->ilow[i] < least || f->ihigh[i] > most) {
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "FastCall: the range of parameter %zd is wider than "
                             "its C type '%c' holds", i, c[i]);
                goto fail;
            }
        } else {
            PyErr_Format(PyExc_ValueError, "FastCall takes no parameter code '%c'", c[i]);
            goto fail;
        }
    }
    f->count = count;
    for (int i = 0; i < 7; ++i) {
        f->slots[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(slots, i));
        if (f->slots[i] < 0 || f->slots[i] >= PyList_GET_SIZE(template)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "FastCall: a slot outside the template");
            goto fail;
        }
    }
    PyObject *keep[] = {configs, opted_in, current_stream, session, backend, log, template, owner};
    PyObject **into[] = {&f->configs, &f->opted_in, &f->current_stream, &f->session, &f->backend,
                         &f->log, &f->template, &f->owner};
    for (int i = 0; i < 8; ++i) { Py_INCREF(keep[i]); *into[i] = keep[i]; }
    f->log_dict = PyObject_GenericGetDict(log, NULL);
    if (f->log_dict == NULL || !PyDict_Check(f->log_dict)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "FastCall: the log's __dict__ is not a dict");
        goto fail;
    }
    /* (the log keeps its two deques, and MAX_RECORDS, for its whole life) */
    PyObject *records = PyObject_GetAttr(log, n_records);
    if (records == NULL) goto fail;
    f->append_record = PyObject_GetAttr(records, n_append);
    Py_DECREF(records);
    if (f->append_record == NULL || (f->awaiting = PyObject_GetAttr(log, n_awaiting)) == NULL
        || (f->append_awaiting = PyObject_GetAttr(f->awaiting, n_append)) == NULL) goto fail;
    PyObject *limit = PyObject_GetAttr(log, n_max_records);
    if (limit == NULL) goto fail;
    f->max_records = PyLong_AsSsize_t(limit);
    Py_DECREF(limit);
    if (f->max_records == -1 && PyErr_Occurred()) goto fail;
    return (PyObject *)f;
fail:
    Py_DECREF(f);
    return NULL;
}

/* 1: the attribute is (or, with want NULL, is not) the object; 0: not; the
 * error of a failed lookup is cleared (the Python path will meet it again). */
static int attr_is(PyObject *obj, PyObject *name, PyObject *want, int negate) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) { PyErr_Clear(); return 0; }
    int same = v == want;
    Py_DECREF(v);
    return negate ? !same : same;
}

/* The pointer an argument passes, or 0 with *ok = 0 where it is not taken. */
static uint64_t fast_pointer(FastCall *f, Py_ssize_t i, PyObject *v, int *ok) {
    uint64_t out = 0;
    *ok = 0;
    if ((PyObject *)Py_TYPE(v) != f->array_type[i]) return 0;
    PyObject *dtype = PyObject_GetAttr(v, n_dtype);
    if (dtype == NULL) { PyErr_Clear(); return 0; }
    /* (identity first; an equal dtype that is another object, 'q' for 'l', compares) */
    int same = dtype == f->dtype[i] ? 1 : PyObject_RichCompareBool(dtype, f->dtype[i], Py_EQ);
    Py_DECREF(dtype);
    if (same != 1) { PyErr_Clear(); return 0; }
    if (!attr_is(v, n_contiguous, Py_True, 0)) return 0;
    if (pointer_of(v, &out) < 0) { PyErr_Clear(); return 0; }
    *ok = 1;
    return out;
}

/* Pack the arguments if every one is taken: 1; 0 where one is not. */
static int fast_pack(FastCall *f, PyObject *args, uint64_t *slots) {
    for (Py_ssize_t i = 0; i < f->count; ++i) {
        PyObject *v = PyTuple_GET_ITEM(args, i);
        uint64_t *slot = &slots[i];
        *slot = 0;
        char code = f->codes[i];
        if (code == 'P') {
            int ok;
            *slot = fast_pointer(f, i, v, &ok);
            if (!ok) return 0;
        } else if (code == 'f' || code == 'd') {
            if (!PyFloat_CheckExact(v)) return 0;
            double x = PyFloat_AS_DOUBLE(v);
            if (!(f->flow[i] <= x && x <= f->fhigh[i])) return 0;  /* (NaN too: its converter decides) */
            if (code == 'f') { float y = (float)x; memcpy(slot, &y, 4); }
            else memcpy(slot, &x, 8);
        } else {
            if (!PyLong_CheckExact(v)) return 0;
            int overflow;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            uint64_t u;
            if (overflow > 0) {  /* above LLONG_MAX: only an unsigned 64-bit parameter takes it */
                u = PyLong_AsUnsignedLongLong(v);
                if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
                if (code != 'Q' || u > f->ihigh[i]) return 0;
            } else {
                if (overflow < 0 || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
                if (x < f->ilow[i] || (x >= 0 && (uint64_t)x > f->ihigh[i])) return 0;
                u = (uint64_t)x;
            }
            /* the C value's own bytes (little-endian: the low ones), the rest of the slot zero */
            memcpy(slot, &u, code == 'b' || code == 'B' ? 1 : code == 'h' || code == 'H' ? 2
                             : code == 'i' || code == 'I' ? 4 : 8);
        }
    }
    return 1;
}

/* The cached (grid3, block3) (a new reference) with its six numbers in dims;
 * NULL, no error set, where the key is new or unhashable. */
static PyObject *fast_config(FastCall *f, PyObject *const *a, unsigned *dims) {
    PyObject *key = PyTuple_Pack(4, a[1], a[2], a[3], a[4]);
    if (key == NULL) { PyErr_Clear(); return NULL; }
    PyObject *config = PyDict_GetItemWithError(f->configs, key);  /* (borrowed) */
    Py_DECREF(key);
    if (config == NULL) { PyErr_Clear(); return NULL; }
    if (!PyTuple_Check(config) || PyTuple_GET_SIZE(config) != 2) return NULL;
    for (int part = 0; part < 2; ++part) {
        PyObject *dim3 = PyTuple_GET_ITEM(config, part);
        if (!PyTuple_Check(dim3) || PyTuple_GET_SIZE(dim3) != 3) return NULL;
        for (int j = 0; j < 3; ++j) {
            unsigned long d = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(dim3, j));
            if (PyErr_Occurred() || d > 0xffffffffUL) { PyErr_Clear(); return NULL; }
            dims[part * 3 + j] = (unsigned)d;
        }
    }
    Py_INCREF(config);  /* (another thread may clear the cache while the launch runs) */
    return config;
}

/* Append the CUPTI record of a launch to the log (as TimingLog.timed_launch does). */
static int fast_record(FastCall *f, PyObject *config, PyObject *shared_mem, PyObject *stream) {
    PyObject *rec = PyList_GetSlice(f->template, 0, PyList_GET_SIZE(f->template));
    if (rec == NULL) return -1;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    PyObject *values[7] = {PyTuple_GET_ITEM(config, 0), PyTuple_GET_ITEM(config, 1), shared_mem,
                           NULL, PyFloat_FromDouble((double)now.tv_sec + now.tv_nsec * 1e-9),
                           stream, NULL};
    Py_INCREF(values[0]); Py_INCREF(values[1]); Py_INCREF(values[2]); Py_INCREF(values[5]);
    if (values[S_WALL] != NULL) values[S_CELL] = PyObject_GetAttr(f->session, n_cell);
    if (values[S_CELL] != NULL) values[S_DEVICE] = PyObject_GetAttr(f->log, n_device);
    int failed = 0;
    for (int i = 0; i < 7; ++i) {
        if (values[i] == NULL) { failed = 1; continue; }
        if (PyList_SetItem(rec, f->slots[i], values[i]) < 0) failed = 1;  /* (steals, even then) */
    }
    /* A kernel's record holds numbers, strings, tuples and its stream, and nothing
     * refers back to it but the log: it can be in no cycle, so the collector need
     * not track it (tracked, the records of a launch loop cost every call a
     * share of the collections they trigger). */
    PyObject_GC_UnTrack(rec);
    PyObject *r;
    if (failed || PyErr_Occurred()) { failed = 1; goto done; }
    failed = 1;
    if ((r = PyObject_CallOneArg(f->append_record, rec)) == NULL) goto done;
    Py_DECREF(r);
    if ((r = PyObject_CallOneArg(f->append_awaiting, rec)) == NULL) goto done;
    Py_DECREF(r);
    Py_ssize_t waiting = PyObject_Length(f->awaiting);
    if (waiting < 0) goto done;
    if (waiting > f->max_records) {
        if ((r = PyObject_CallMethodOneArg(f->log, n_resolve, f->backend)) == NULL) goto done;
        Py_DECREF(r);
    }
    failed = 0;
done:
    Py_DECREF(rec);
    return failed ? -1 : 0;
}

static PyObject *fast_call(FastCall *f, PyObject *const *a, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 5 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "FastCall(args, grid, block, shared_mem, n)");
        return NULL;
    }
    PyObject *args = a[0];
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != f->count || cu_launch_kernel == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    if (!attr_is(f->session, n_backend, f->backend, 0)) Py_RETURN_NOTIMPLEMENTED;
    PyObject *enabled_obj = PyObject_GetAttr(f->log, n_enabled);
    if (enabled_obj == NULL) { PyErr_Clear(); Py_RETURN_NOTIMPLEMENTED; }
    int enabled = PyObject_IsTrue(enabled_obj);
    Py_DECREF(enabled_obj);
    if (enabled < 0) { PyErr_Clear(); Py_RETURN_NOTIMPLEMENTED; }
    if (enabled ? !attr_is(f->log, n_log_backend, f->backend, 0) || !attr_is(f->log, n_activity, Py_None, 1)
                : !attr_is(f->log, n_capture, Py_None, 0))
        Py_RETURN_NOTIMPLEMENTED;  /* timed by events, switching backends, or capturing a graph */
    PyObject *wrapper = PyDict_GetItemWithError(f->log_dict, n_timed_launch);
    if (wrapper != NULL || PyErr_Occurred()) { PyErr_Clear(); Py_RETURN_NOTIMPLEMENTED; }
    unsigned dims[6];
    long long shared = PyLong_AsLongLong(a[3]);
    if (shared == -1 && PyErr_Occurred()) { PyErr_Clear(); Py_RETURN_NOTIMPLEMENTED; }
    PyObject *allowed = PyList_GET_SIZE(f->opted_in) ? PyList_GET_ITEM(f->opted_in, 0) : NULL;
    long long opted = allowed ? PyLong_AsLongLong(allowed) : -1;
    if (opted == -1 && PyErr_Occurred()) { PyErr_Clear(); Py_RETURN_NOTIMPLEMENTED; }
    if (shared < 0 || shared > opted) Py_RETURN_NOTIMPLEMENTED;  /* (the Python path opts in) */
    uint64_t slots[MAX_PARAMS];
    void *params[MAX_PARAMS];
    if (!fast_pack(f, args, slots)) Py_RETURN_NOTIMPLEMENTED;
    for (Py_ssize_t i = 0; i < f->count; ++i) params[i] = &slots[i];
    PyObject *config = fast_config(f, a, dims);
    if (config == NULL) Py_RETURN_NOTIMPLEMENTED;
    PyObject *stream = PyObject_CallNoArgs(f->current_stream);
    PyObject *ptr = stream ? PyObject_GetAttr(stream, name_ptr) : NULL;
    void *stream_ptr = ptr ? PyLong_AsVoidPtr(ptr) : NULL;
    Py_XDECREF(ptr);
    if (PyErr_Occurred()) { Py_DECREF(config); Py_XDECREF(stream); return NULL; }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = cu_launch_kernel(f->function, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
                              (unsigned)shared, stream_ptr, params, NULL);
    Py_END_ALLOW_THREADS
    int failed = status == 0 && enabled && fast_record(f, config, a[3], stream) < 0;
    Py_DECREF(config);
    Py_DECREF(stream);
    if (failed) return NULL;
    if (status != 0) return PyLong_FromLong(status);
    ++f->taken;
    Py_RETURN_NONE;
}

static PyMemberDef fast_members[] = {
    {"taken", T_ULONGLONG, offsetof(FastCall, taken), READONLY, "Calls this object launched."},
    {NULL},
};

static PyTypeObject FastCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_wb_launch.FastCall",
    .tp_basicsize = sizeof(FastCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)fast_traverse,
    .tp_clear = (inquiry)fast_clear,
    .tp_doc = "A whole wb.Kernel call in one C call (see launch.c).",
    .tp_new = fast_new,
    .tp_dealloc = (destructor)fast_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FastCall, vectorcall),
    .tp_members = fast_members,
};

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "Pack and launch (see the file's comment)."},
    {"pack", (PyCFunction)(void (*)(void))pack, METH_FASTCALL, "The packed argument block."},
    {"has_driver", has_driver, METH_NOARGS, "Whether libcuda's cuLaunchKernel was found."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wb_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wb_launch(void) {
    name_data = PyUnicode_InternFromString("data");
    name_ptr = PyUnicode_InternFromString("ptr");
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (libcuda == NULL) libcuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (libcuda != NULL) {
        cu_launch_kernel = (cu_launch_kernel_t)dlsym(libcuda, "cuLaunchKernel");
        cu_event_record = (cu_event_record_t)dlsym(libcuda, "cuEventRecord");
    }
    struct { PyObject **into; const char *text; } names[] = {
        {&n_backend, "backend"}, {&n_cell, "cell"}, {&n_enabled, "enabled"}, {&n_capture, "capture"},
        {&n_log_backend, "_backend"}, {&n_activity, "_activity"}, {&n_records, "records"},
        {&n_awaiting, "_awaiting"}, {&n_max_records, "MAX_RECORDS"}, {&n_resolve, "resolve_finished"},
        {&n_device, "_device"}, {&n_append, "append"}, {&n_dtype, "dtype"},
        {&n_contiguous, "_c_contiguous"}, {&n_timed_launch, "timed_launch"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
        if ((*names[i].into = PyUnicode_InternFromString(names[i].text)) == NULL) return NULL;
    if (PyType_Ready(&FastCallType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&FastCallType);
    if (PyModule_AddObject(m, "FastCall", (PyObject *)&FastCallType) < 0) {
        Py_DECREF(&FastCallType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
