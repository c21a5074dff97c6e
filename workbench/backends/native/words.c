/* Words of memory shared with a device (mapped, page-locked host memory, or the
 * simulator's shared arena) written and watched from C, with the GIL released
 * while watching (see workbench/backends/native_words.py, which builds this file
 * once per machine and falls back to Python where it cannot).
 *
 * Addresses are plain ints; the caller keeps the memory alive and in range.
 * Words are 8-byte aligned int64s. A watch spins (no sleep, no pause
 * instruction: the answer's latency is the point) for at most spin_ns and then
 * returns, so that the caller's Python runs again (Ctrl-C, timeouts, health
 * checks) before it watches more.
 *
 * publish_wait(store, value, word, want, src, dst, nbytes, spin_ns) -> (published_ns, seen_ns) | None
 *   *store = value (a release store), then watch *word until it equals want
 *   (acquire loads); once it does, copy nbytes from src to dst. None: not seen
 *   within spin_ns (nothing copied). Times are CLOCK_MONOTONIC ns, the clock of
 *   Python's time.perf_counter_ns on Linux.
 * wait_word(word, want, spin_ns) -> bool
 *   Watch *word until it equals want; False if it did not within spin_ns.
 * run_length(words, first, count) -> int
 *   How many of words[0], words[1], ... (up to count) hold first, first + 1, ...
 *   in order, up to the first that does not (acquire loads).
 * ll_write(dst, src, nbytes, flag) -> published_ns
 *   Write nbytes (a multiple of 4) from src to dst as "LL" words (NCCL's
 *   low-latency protocol): each 4 data bytes in one 8-byte store with the 32-bit
 *   flag in its high half, so a reader that sees the flag in a word sees that
 *   word's data too (8-byte stores and loads are single-copy atomic) and needs no
 *   separate ready word, nor fences. dst takes 2 * nbytes.
 * ll_wait(src, nbytes, flag, dst, spin_ns) -> bool
 *   Watch the 2 * nbytes of LL words at src until every word's flag is flag, then
 *   copy their data (nbytes) to dst; False (nothing copied) if not within spin_ns.
 * now_ns() -> int: CLOCK_MONOTONIC in ns (for tests).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static inline int64_t load_acquire(const int64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

static inline int64_t now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Watch *word (GIL released by the caller) until it equals want or spin_ns pass. */
static int watch(const int64_t *word, int64_t want, int64_t spin_ns) {
    if (load_acquire(word) == want) return 1;
    const int64_t end = now() + spin_ns;
    for (;;) {
        for (int i = 0; i < 64; ++i)  /* the clock is read once per 64 loads */
            if (load_acquire(word) == want) return 1;
        if (now() >= end) return load_acquire(word) == want;
    }
}

static int address_of(PyObject *obj, void **out) {
    *out = PyLong_AsVoidPtr(obj);
    if (*out == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a null address");
        return -1;
    }
    if (((uintptr_t)*out & 7) != 0) {
        PyErr_SetString(PyExc_ValueError, "a word's address must be 8-byte aligned");
        return -1;
    }
    return 0;
}

static int number_of(PyObject *obj, int64_t *out) {
    *out = (int64_t)PyLong_AsLongLong(obj);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *publish_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "publish_wait() takes 8 arguments");
        return NULL;
    }
    void *store, *word;
    int64_t value, want, nbytes, spin_ns;
    if (address_of(args[0], &store) < 0 || number_of(args[1], &value) < 0
        || address_of(args[2], &word) < 0 || number_of(args[3], &want) < 0) return NULL;
    void *src = PyLong_AsVoidPtr(args[4]);
    void *dst = PyLong_AsVoidPtr(args[5]);
    if (PyErr_Occurred() || number_of(args[6], &nbytes) < 0 || number_of(args[7], &spin_ns) < 0)
        return NULL;
    if (nbytes < 0 || (nbytes > 0 && (src == NULL || dst == NULL))) {
        PyErr_SetString(PyExc_ValueError, "publish_wait(): a copy needs two addresses and a size >= 0");
        return NULL;
    }
    int64_t published, seen = 0;
    int got;
    Py_BEGIN_ALLOW_THREADS
    published = now();
    __atomic_store_n((int64_t *)store, value, __ATOMIC_RELEASE);
    got = watch((const int64_t *)word, want, spin_ns);
    if (got) {
        seen = now();
        if (nbytes) memcpy(dst, src, (size_t)nbytes);  /* after the acquire load: the answer's bytes */
    }
    Py_END_ALLOW_THREADS
    if (!got) Py_RETURN_NONE;
    return Py_BuildValue("(LL)", (long long)published, (long long)seen);
}

static PyObject *wait_word(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "wait_word() takes 3 arguments");
        return NULL;
    }
    void *word;
    int64_t want, spin_ns;
    if (address_of(args[0], &word) < 0 || number_of(args[1], &want) < 0
        || number_of(args[2], &spin_ns) < 0) return NULL;
    if (load_acquire((const int64_t *)word) == want) Py_RETURN_TRUE;  /* (no GIL round trip) */
    int got;
    Py_BEGIN_ALLOW_THREADS
    got = watch((const int64_t *)word, want, spin_ns);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(got);
}

static PyObject *run_length(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "run_length() takes 3 arguments");
        return NULL;
    }
    void *words;
    int64_t first, count;
    if (address_of(args[0], &words) < 0 || number_of(args[1], &first) < 0
        || number_of(args[2], &count) < 0) return NULL;
    const int64_t *w = (const int64_t *)words;
    int64_t n = 0;
    while (n < count && load_acquire(&w[n]) == first + n) ++n;
    return PyLong_FromLongLong((long long)n);
}

static PyObject *ll_write(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "ll_write() takes 4 arguments");
        return NULL;
    }
    void *dst;
    int64_t nbytes, flag;
    if (address_of(args[0], &dst) < 0) return NULL;
    const uint8_t *src = (const uint8_t *)PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred() || number_of(args[2], &nbytes) < 0 || number_of(args[3], &flag) < 0)
        return NULL;
    if (nbytes < 0 || nbytes % 4 || (nbytes && src == NULL)) {
        PyErr_SetString(PyExc_ValueError, "ll_write(): nbytes must be a multiple of 4 with a source");
        return NULL;
    }
    const int64_t published = now();
    uint64_t *out = (uint64_t *)dst;
    const uint64_t high = (uint64_t)(uint32_t)flag << 32;
    for (int64_t i = 0; i < nbytes / 4; ++i) {
        uint32_t data;
        memcpy(&data, src + 4 * i, 4);
        __atomic_store_n(&out[i], high | data, __ATOMIC_RELAXED);
    }
    return PyLong_FromLongLong((long long)published);
}

static int ll_ready(const uint64_t *words, int64_t count, uint32_t flag) {
    for (int64_t i = 0; i < count; ++i)
        if ((uint32_t)(__atomic_load_n(&words[i], __ATOMIC_RELAXED) >> 32) != flag) return 0;
    return 1;
}

static PyObject *ll_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "ll_wait() takes 5 arguments");
        return NULL;
    }
    void *src;
    int64_t nbytes, flag, spin_ns;
    if (address_of(args[0], &src) < 0 || number_of(args[1], &nbytes) < 0
        || number_of(args[2], &flag) < 0) return NULL;
    uint8_t *dst = (uint8_t *)PyLong_AsVoidPtr(args[3]);
    if (PyErr_Occurred() || number_of(args[4], &spin_ns) < 0) return NULL;
    if (nbytes < 0 || nbytes % 4 || (nbytes && dst == NULL)) {
        PyErr_SetString(PyExc_ValueError, "ll_wait(): nbytes must be a multiple of 4 with a destination");
        return NULL;
    }
    const uint64_t *words = (const uint64_t *)src;
    const int64_t count = nbytes / 4;
    int got = 0;
    Py_BEGIN_ALLOW_THREADS
    const int64_t end = now() + spin_ns;
    for (;;) {
        if (ll_ready(words, count, (uint32_t)flag)) { got = 1; break; }
        if (now() >= end) break;
    }
    if (got)
        for (int64_t i = 0; i < count; ++i) {
            const uint32_t data = (uint32_t)__atomic_load_n(&words[i], __ATOMIC_RELAXED);
            memcpy(dst + 4 * i, &data, 4);
        }
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(got);
}

static PyObject *now_ns(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong((long long)now());
}

static PyMethodDef methods[] = {
    {"publish_wait", (PyCFunction)(void (*)(void))publish_wait, METH_FASTCALL,
     "Store a word, watch another, copy the answer (see the file's comment)."},
    {"wait_word", (PyCFunction)(void (*)(void))wait_word, METH_FASTCALL,
     "Watch a word until it holds a value, for at most spin_ns."},
    {"run_length", (PyCFunction)(void (*)(void))run_length, METH_FASTCALL,
     "How many consecutive words hold consecutive numbers."},
    {"ll_write", (PyCFunction)(void (*)(void))ll_write, METH_FASTCALL,
     "Write bytes as LL words (data and flag in each 8 bytes)."},
    {"ll_wait", (PyCFunction)(void (*)(void))ll_wait, METH_FASTCALL,
     "Watch LL words until all carry a flag, then copy their data."},
    {"now_ns", now_ns, METH_NOARGS, "CLOCK_MONOTONIC in ns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wb_words", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wb_words(void) { return PyModule_Create(&module); }
