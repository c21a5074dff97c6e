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
 * ll_call(src, nbytes, ll_out, plain_out, head, seq, ll_back, back_nbytes, dst, word, plain_back,
 *         stamps, spin_ns) -> (published_ns, seen_ns, device_ns) | None
 *   A lone message's round trip with LL words (8 bytes: 4 data bytes, then the flag, the low
 *   31 bits of seq with the top bit set, so that a cleared word never matches): the answer's
 *   LL words at ll_back cleared, nbytes from src written as LL words at ll_out (the last one
 *   padded with zeros), then copied plainly to plain_out, then *head = seq (a release store). Then
 *   watch the answer: either every one of the LL words at ll_back (back_nbytes of data,
 *   then one word of the handler's time in ns) carries the flag, or *word == seq (the
 *   plain answer, published with its bytes at plain_back and its two stamps at stamps).
 *   Either way back_nbytes are copied to dst, device_ns is the handler's time. None: no
 *   answer within spin_ns (the message is out; watch on as for any other). Either way the
 *   request's LL words are cleared before returning (the device falls back on the head).
 *   ll_out, head, ll_back, word and stamps are 8-byte aligned; src, plain_out, dst and
 *   plain_back any bytes.
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

/* The address of bytes (no alignment needed). */
static int bytes_at(PyObject *obj, void **out) {
    *out = PyLong_AsVoidPtr(obj);
    if (*out == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a null address");
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
    if (PyErr_Occurred()) return NULL;
    void *dst = PyLong_AsVoidPtr(args[5]);
    if (PyErr_Occurred() || number_of(args[6], &nbytes) < 0 || number_of(args[7], &spin_ns) < 0)
        return NULL;
    if (nbytes < 0 || (nbytes > 0 && (src == NULL || dst == NULL))) {
        PyErr_SetString(PyExc_ValueError, "publish_wait(): a copy needs two addresses and a size >= 0");
        return NULL;
    }
    int64_t published = now(), seen = 0, held = spin_ns < HELD_NS ? spin_ns : HELD_NS;
    __atomic_store_n((int64_t *)store, value, __ATOMIC_RELEASE);
    int got = watch((const int64_t *)word, want, held);  /* (GIL held: see the file's comment) */
    if (!got && spin_ns > held) {
        Py_BEGIN_ALLOW_THREADS
        got = watch((const int64_t *)word, want, spin_ns - held);
        Py_END_ALLOW_THREADS
    }
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
    int64_t held = spin_ns < HELD_NS ? spin_ns : HELD_NS;
    int got = watch((const int64_t *)word, want, held);  /* (GIL held: see the file's comment) */
    if (!got && spin_ns > held) {
        Py_BEGIN_ALLOW_THREADS
        got = watch((const int64_t *)word, want, spin_ns - held);
        Py_END_ALLOW_THREADS
    }
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

/* An LL answer of count data words and the time word: all flagged? Then its bytes (and time). */
static int ll_take(const uint64_t *words, int64_t count, uint32_t flag, uint8_t *dst,
                   int64_t nbytes, int64_t *device_ns) {
    for (int64_t i = 0; i <= count; ++i)
        if ((uint32_t)(__atomic_load_n(&words[i], __ATOMIC_RELAXED) >> 32) != flag) return 0;
    /* (read again: a word carrying the flag never changes before the next lap of the slot) */
    for (int64_t i = 0; i < count; ++i) {
        const uint32_t data = (uint32_t)__atomic_load_n(&words[i], __ATOMIC_RELAXED);
        const int64_t n = nbytes - 4 * i < 4 ? nbytes - 4 * i : 4;
        memcpy(dst + 4 * i, &data, (size_t)n);
    }
    *device_ns = (int64_t)(uint32_t)__atomic_load_n(&words[count], __ATOMIC_RELAXED);
    return 1;
}

typedef struct {
    const uint64_t *ll;
    int64_t count, nbytes, seq;
    uint32_t flag;
    const int64_t *word;
    const uint8_t *plain;
    const uint64_t *stamps;
    uint8_t *dst;
    int64_t device_ns;
} ll_answer;

static int ll_seen(ll_answer *a) {
    if (ll_take(a->ll, a->count, a->flag, a->dst, a->nbytes, &a->device_ns)) return 1;
    if (load_acquire(a->word) == a->seq) {  /* served the plain way: its stamps came before */
        memcpy(a->dst, a->plain, (size_t)a->nbytes);
        a->device_ns = (int64_t)(a->stamps[1] - a->stamps[0]);
        return 1;
    }
    return 0;
}

static int ll_watch(ll_answer *a, int64_t spin_ns) {
    if (ll_seen(a)) return 1;
    const int64_t end = now() + spin_ns;
    for (;;) {
        for (int i = 0; i < 16; ++i)
            if (ll_seen(a)) return 1;
        if (now() >= end) return ll_seen(a);
    }
}

static PyObject *ll_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "ll_call() takes 13 arguments");
        return NULL;
    }
    void *src, *ll_out, *plain_out, *head, *ll_back, *dst, *word, *plain_back, *stamps;
    int64_t nbytes, seq, back_nbytes, spin_ns;
    if (bytes_at(args[0], &src) < 0 || number_of(args[1], &nbytes) < 0
        || address_of(args[2], &ll_out) < 0 || bytes_at(args[3], &plain_out) < 0
        || address_of(args[4], &head) < 0 || number_of(args[5], &seq) < 0
        || address_of(args[6], &ll_back) < 0 || number_of(args[7], &back_nbytes) < 0
        || bytes_at(args[8], &dst) < 0 || address_of(args[9], &word) < 0
        || bytes_at(args[10], &plain_back) < 0 || address_of(args[11], &stamps) < 0
        || number_of(args[12], &spin_ns) < 0) return NULL;
    if (nbytes <= 0 || back_nbytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "ll_call(): message sizes must be positive");
        return NULL;
    }
    const uint32_t flag = (uint32_t)seq | 0x80000000u;
    const uint64_t high = (uint64_t)flag << 32;
    const uint8_t *in = (const uint8_t *)src;
    const int64_t back_count = (back_nbytes + 3) / 4;
    int64_t published = now(), seen = 0;
    uint64_t *out = (uint64_t *)ll_out;
    for (int64_t i = 0; i <= back_count; ++i)  /* whatever an earlier message left there */
        __atomic_store_n(&((uint64_t *)ll_back)[i], 0, __ATOMIC_RELAXED);
    for (int64_t i = 0; 4 * i < nbytes; ++i) {  /* LL words first: the device reads them first */
        uint32_t data = 0;
        memcpy(&data, in + 4 * i, (size_t)(nbytes - 4 * i < 4 ? nbytes - 4 * i : 4));
        __atomic_store_n(&out[i], high | data, __ATOMIC_RELAXED);
    }
    memcpy(plain_out, src, (size_t)nbytes);
    __atomic_store_n((int64_t *)head, seq, __ATOMIC_RELEASE);
    ll_answer a = {(const uint64_t *)ll_back, back_count, back_nbytes, seq, flag,
                   (const int64_t *)word, (const uint8_t *)plain_back, (const uint64_t *)stamps,
                   (uint8_t *)dst, 0};
    int64_t held = spin_ns < HELD_NS ? spin_ns : HELD_NS;
    int got = ll_watch(&a, held);  /* (GIL held: see the file's comment) */
    if (!got && spin_ns > held) {
        Py_BEGIN_ALLOW_THREADS
        got = ll_watch(&a, spin_ns - held);
        Py_END_ALLOW_THREADS
    }
    if (got) seen = now();
    /* The request's LL words cleared: taken by now, or the device reads the plain slot (the
     * head is out), and no later message of the slot can take them for its own. */
    for (int64_t i = 0; 4 * i < nbytes; ++i) __atomic_store_n(&out[i], 0, __ATOMIC_RELAXED);
    if (!got) Py_RETURN_NONE;
    return Py_BuildValue("(LLL)", (long long)published, (long long)seen, (long long)a.device_ns);
}

static PyMethodDef methods[] = {
    {"publish_wait", (PyCFunction)(void (*)(void))publish_wait, METH_FASTCALL,
     "Store a word, watch another, copy the answer (see the file's comment)."},
    {"wait_word", (PyCFunction)(void (*)(void))wait_word, METH_FASTCALL,
     "Watch a word until it holds a value, for at most spin_ns."},
    {"ll_call", (PyCFunction)(void (*)(void))ll_call, METH_FASTCALL,
     "A lone message's round trip through LL words (see the file's comment)."},
    {"run_length", (PyCFunction)(void (*)(void))run_length, METH_FASTCALL,
     "How many consecutive words hold consecutive numbers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wb_words", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wb_words(void) { return PyModule_Create(&module); }
