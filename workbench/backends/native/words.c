/* Words of memory shared with a device (mapped, page-locked host memory, or the
 * simulator's shared arena) written and watched from C, with the GIL released
 * while watching (see workbench/backends/native_words.py, which builds this file
 * once per machine and falls back to Python where it cannot).
 *
 * Addresses are plain ints; the caller keeps the memory alive and in range.
 * Words are 8-byte aligned int64s. A watch spins (no sleep, no pause
 * instruction: the answer's latency is the point) for at most spin_ns and then
 * returns, so that the caller's Python runs again (Ctrl-C, timeouts, health
 * checks) before it watches more. It spins its first HELD_NS holding the GIL:
 * most answers come within a GPU round trip, and a thread that gives the GIL
 * away waits for it back behind any busy Python thread (up to the 5 ms switch
 * interval); only a longer watch lets other threads run.
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

#define HELD_NS 100000  /* 100 µs: several GPU round trips */

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

/* watch(), holding the GIL (the caller's) for the first HELD_NS and giving it
 * away for the rest (see the file's comment). */
static int watch_then_release(const int64_t *word, int64_t want, int64_t spin_ns) {
    int64_t held = spin_ns < HELD_NS ? spin_ns : HELD_NS;
    int got = watch(word, want, held);
    if (!got && spin_ns > held) {
        Py_BEGIN_ALLOW_THREADS
        got = watch(word, want, spin_ns - held);
        Py_END_ALLOW_THREADS
    }
    return got;
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
    if (PyErr_Occurred()) return NULL;
    void *dst = PyLong_AsVoidPtr(args[5]);
    if (PyErr_Occurred() || number_of(args[6], &nbytes) < 0 || number_of(args[7], &spin_ns) < 0)
        return NULL;
    if (nbytes < 0 || (nbytes > 0 && (src == NULL || dst == NULL))) {
        PyErr_SetString(PyExc_ValueError, "publish_wait(): a copy needs two addresses and a size >= 0");
        return NULL;
    }
    int64_t published = now(), seen = 0;
    __atomic_store_n((int64_t *)store, value, __ATOMIC_RELEASE);
    int got = watch_then_release((const int64_t *)word, want, spin_ns);
    if (got) {
        seen = now();
        if (nbytes) memcpy(dst, src, (size_t)nbytes);  /* after the acquire load: the answer's bytes */
    }
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
    return PyBool_FromLong(watch_then_release((const int64_t *)word, want, spin_ns));
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

static PyMethodDef methods[] = {
    {"publish_wait", (PyCFunction)(void (*)(void))publish_wait, METH_FASTCALL,
     "Store a word, watch another, copy the answer (see the file's comment)."},
    {"wait_word", (PyCFunction)(void (*)(void))wait_word, METH_FASTCALL,
     "Watch a word until it holds a value, for at most spin_ns."},
    {"run_length", (PyCFunction)(void (*)(void))run_length, METH_FASTCALL,
     "How many consecutive words hold consecutive numbers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wb_words", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wb_words(void) { return PyModule_Create(&module); }
