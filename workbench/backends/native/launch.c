/* The GPU backend's launch of a kernel with a known parameter layout, in C:
 * the argument block packed and cuLaunchKernel called without Python frames
 * in between (see workbench/backends/native_launch.py, which builds this file
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

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
    return PyModule_Create(&module);
}
