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
 * publish_wait(store, value, word, want, src, dst, nbytes, spin_ns[, bell]) -> (published_ns, seen_ns) | None
 *   *store = value (a release store; then the bell rung, see ring_bell), then watch *word until it equals want
 *   (acquire loads); once it does, copy nbytes from src to dst. None: not seen
 *   within spin_ns (nothing copied). Times are CLOCK_MONOTONIC ns, the clock of
 *   Python's time.perf_counter_ns on Linux.
 * BoxCaller(box, nbytes, box_words, answer, answer_words, response_bytes,
 *           fields, make_pool, single)
 *   One message at a time through a ring's call box (workbench/rings/codegen.py
 *   says what the device does). Both boxes hold 8-byte words of 4 bytes of data
 *   and a 4-byte flag, (seq & 0xffffffff) | 0x80000000 (an aligned 8-byte word
 *   is written and read whole: a word carrying the flag carries its data).
 *   caller.call(message, seq, spin_ns) -> record | None | NotImplemented:
 *   the message (a tuple, packed here by `fields`, ((offset, struct code), ...),
 *   or a bytes-like object of nbytes already packed) is written: the answer's
 *   answer_words words cleared, then the box's box_words words, flagged; the
 *   answer is watched until every word carries the flag, and its data are the
 *   response (response_bytes of them) and the handler's ns (the two words
 *   after). The request box is cleared then (so that a number 2^31 later can
 *   never find it full), the response copied into the next place of a private
 *   array of records (make_pool(need) gives (array, address, length >= need)
 *   when one is used up) and returned as that record, and (round trip ns,
 *   handler ns) appended to the bytearray `single` as two int64s (a tuple
 *   and two ints a call cost more than the rest of the host's part after the
 *   answer). None: no answer
 *   within spin_ns (caller.sent_ns says when it was sent; the box keeps the
 *   message: caller.clear() empties it once the answer came another way).
 *   NotImplemented: a tuple this packer does not take (a value of another
 *   type or out of range, another field count): nothing written.
 * Slots(requests, responses, stamps, answered, head, capacity, request_bytes, response_bytes,
 *       make_pool)
 *   A ring's queue of slots, for send() and recv() of whole batches (the ring keeps the counts):
 *   slots.write(batch, first, next_recv) -> ns | None: a 1-D C-contiguous buffer of whole
 *   requests copied into slots first % capacity on (wrapping at the end), NOT published: the
 *   caller counts the messages first, then stores the head (so that a Ctrl-C in between never
 *   leaves messages sent that the host does not count). ns: CLOCK_MONOTONIC when the copy began.
 *   None, nothing written: not such a buffer, or more requests than the free slots
 *   (capacity - (first - next_recv)).
 *   slots.take(first, count, head, spin_ns) -> (answers, stamps, ns) | None: *head made `head`
 *   if it is not (a send cut short by Ctrl-C), then answered[] watched until messages first ..
 *   first + count - 1 all hold their numbers (the last one first: they come out of order), for
 *   at most spin_ns; then their responses copied into `count` places of a private array of
 *   records (answers: a slice of it; make_pool(need) gives (array, address, length >= need)
 *   when it is used up), their device stamps (16 bytes each) into a bytes object; ns: when the
 *   last was seen. None: not all within spin_ns (nothing taken).
 * ring_bell(control)
 *   A ring whose dispatcher may sleep (the simulator's: a futex on the low half of control[3],
 *   having set control[2]) is woken after the caller published something: a full fence (the
 *   publication before the look at the flag; the dispatcher sets the flag, fences, then looks
 *   for work once more), then, if the flag is set, it is cleared, the bell word counted up and
 *   its sleeper woken. BoxCaller and Slots take the same address as an optional last argument
 *   (0 or None: no bell, as on a GPU) and ring after writing a call or republishing a head.
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
#include <float.h>
#include <math.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#include <sched.h>

static inline int64_t load_acquire(const int64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

/* See ring_bell in the file's comment. */
static void ring_bell_at(int64_t *control) {
    if (control == NULL) return;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&control[2], __ATOMIC_RELAXED) == 0) return;
    __atomic_store_n(&control[2], 0, __ATOMIC_RELAXED);
    uint32_t *bell = (uint32_t *)&control[3];
    __atomic_fetch_add(bell, 1u, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static inline int64_t now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#define HELD_NS 100000  /* 100 µs: several GPU round trips */

/* What a watch waits for: *word == want, or each of n words' high half == flag. */
typedef int (*seen_fn)(const void *at, int64_t a);
static int word_holds(const void *word, int64_t want) { return load_acquire(word) == want; }

typedef struct { const uint64_t *words; int64_t n; } flagged_words;
static int all_flagged(const void *at, int64_t flag) {
    const flagged_words *f = at;
    for (int64_t k = f->n - 1; k >= 0; --k)  /* the last first: they come in order, mostly */
        if ((uint32_t)(__atomic_load_n(&f->words[k], __ATOMIC_ACQUIRE) >> 32) != (uint32_t)flag)
            return 0;
    return 1;
}

/* Watch until seen(at, a) or spin_ns pass. Past YIELD_AFTER_NS of watching the CPU is offered
 * (sched_yield) every YIELD_EVERY_NS: the answer is not coming within a GPU round trip, and
 * what produces it may be waiting for this very CPU (the simulator's worker, on a machine
 * with few CPUs: a watch that never yields keeps it out for a whole time slice, milliseconds).
 * With nothing else to run, a yield returns at once. */
#define YIELD_AFTER_NS 20000
#define YIELD_EVERY_NS 20000
static int watch(seen_fn seen, const void *at, int64_t a, int64_t spin_ns) {
    if (seen(at, a)) return 1;
    const int64_t start = now(), end = start + spin_ns;
    int64_t next_yield = start + YIELD_AFTER_NS;
    for (;;) {
        for (int i = 0; i < 64; ++i)  /* the clock is read once per 64 polls */
            if (seen(at, a)) return 1;
        const int64_t t = now();
        if (t >= end) return seen(at, a);
        if (t >= next_yield) {
            sched_yield();
            next_yield = now() + YIELD_EVERY_NS;
        }
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

/* An optional bell (a ring's control words): None or 0 for none. */
static int bell_of(PyObject *obj, int64_t **out) {
    *out = NULL;
    if (obj == NULL || obj == Py_None) return 0;
    void *p = PyLong_AsVoidPtr(obj);
    if (p == NULL) return PyErr_Occurred() ? -1 : 0;
    if (((uintptr_t)p & 7) != 0) {
        PyErr_SetString(PyExc_ValueError, "a bell's address must be 8-byte aligned");
        return -1;
    }
    *out = (int64_t *)p;
    return 0;
}

static int number_of(PyObject *obj, int64_t *out) {
    *out = (int64_t)PyLong_AsLongLong(obj);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* watch(), holding the GIL (the caller's) for the first HELD_NS and giving it
 * away for the rest (see the file's comment). */
static int watch_then_release(seen_fn seen, const void *at, int64_t a, int64_t spin_ns) {
    int64_t held = spin_ns < HELD_NS ? spin_ns : HELD_NS;
    int got = watch(seen, at, a, held);
    if (!got && spin_ns > held) {
        Py_BEGIN_ALLOW_THREADS
        got = watch(seen, at, a, spin_ns - held);
        Py_END_ALLOW_THREADS
    }
    return got;
}

static PyObject *publish_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 && nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "publish_wait() takes 8 arguments (and a bell)");
        return NULL;
    }
    int64_t *bell;
    if (bell_of(nargs == 9 ? args[8] : NULL, &bell) < 0) return NULL;
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
    ring_bell_at(bell);
    int got = watch_then_release(word_holds, word, want, spin_ns);
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
    return PyBool_FromLong(watch_then_release(word_holds, word, want, spin_ns));
}

static PyObject *ring_bell(PyObject *self, PyObject *control) {
    int64_t *at;
    if (bell_of(control, &at) < 0) return NULL;
    ring_bell_at(at);
    Py_RETURN_NONE;
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

/* ---- a private array of answer records, used a place (or a run of places) at a time ---- */
typedef struct {
    PyObject *make;   /* make(need) -> (array, address, length >= need) */
    PyObject *array;
    char *data;
    Py_ssize_t length, next;
} record_pool;

/* Make sure `need` places of `size` bytes are free at pool->next (a new array when they are not;
 * its buffer must be the address and length make() gave). */
static int pool_reserve(record_pool *pool, Py_ssize_t need, int64_t size) {
    if (pool->array != NULL && pool->next + need <= pool->length) return 0;
    PyObject *made = PyObject_CallFunction(pool->make, "n", need);
    if (made == NULL) return -1;
    PyObject *array, *address;
    Py_ssize_t length;
    void *data = NULL;
    int ok = PyTuple_Check(made) && PyArg_ParseTuple(made, "OOn", &array, &address, &length)
             && length >= need && (data = PyLong_AsVoidPtr(address)) != NULL;
    if (ok) {  /* the array must be that memory: the answers are copied to the address */
        Py_buffer view;
        ok = PyObject_GetBuffer(array, &view, PyBUF_SIMPLE) == 0;
        if (ok) {
            ok = view.buf == data && view.len >= length * size;
            PyBuffer_Release(&view);
        }
        PyErr_Clear();
    }
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "make_pool(need): (array, its address, its length "
                            ">= need in records)");
        Py_DECREF(made);
        return -1;
    }
    Py_INCREF(array);
    Py_XSETREF(pool->array, array);
    Py_DECREF(made);
    pool->data = data;
    pool->length = length;
    pool->next = 0;
    return 0;
}

/* ---- BoxCaller (see the file's comment) ---- */
#define MAX_FIELDS 64
#define MAX_BOX_WORDS 64

typedef struct {
    PyObject_HEAD
    uint64_t *box, *answer;
    int64_t nbytes, box_words, answer_words, response_bytes;
    int nfields, busy;
    int32_t offsets[MAX_FIELDS];
    char codes[MAX_FIELDS];
    char *scratch;  /* the message packed: box_words * 4 bytes */
    PyObject *single;
    record_pool pool;
    int64_t sent_ns, seen_ns;
    int64_t *bell;
} BoxCaller;

static void caller_dealloc(BoxCaller *c) {
    Py_XDECREF(c->pool.make);
    Py_XDECREF(c->single);
    Py_XDECREF(c->pool.array);
    PyMem_Free(c->scratch);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyObject *caller_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *box, *answer, *fields, *make_pool, *single, *bell = NULL;
    long long nbytes, box_words, answer_words, response_bytes;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "BoxCaller() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OLLOLLOOO!|O", &box, &nbytes, &box_words,
                          &answer, &answer_words, &response_bytes, &fields, &make_pool,
                          &PyByteArray_Type, &single, &bell))
        return NULL;
    if (nbytes < 1 || box_words < (nbytes + 3) / 4 || box_words > MAX_BOX_WORDS
        || answer_words < 3 || answer_words > MAX_BOX_WORDS || response_bytes < 1
        || (response_bytes + 3) / 4 + 2 > answer_words || !PyCallable_Check(make_pool)) {
        PyErr_SetString(PyExc_ValueError, "BoxCaller(): a message that fits its box, "
                        "an answer of up to 64 words holding the response and 8 bytes more, and "
                        "make_pool()");
        return NULL;
    }
    BoxCaller *c = (BoxCaller *)type->tp_alloc(type, 0);
    if (c == NULL) return NULL;
    if (address_of(box, (void **)&c->box) < 0 || address_of(answer, (void **)&c->answer) < 0
        || bell_of(bell, &c->bell) < 0)
        goto fail;
    c->nbytes = nbytes; c->box_words = box_words;
    c->answer_words = answer_words; c->response_bytes = response_bytes;
    c->nfields = 0;
    if (fields != Py_None) {
        PyObject *seq = PySequence_Fast(fields, "fields: a sequence of (offset, code)");
        if (seq == NULL) goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        int ok = n <= MAX_FIELDS;
        for (Py_ssize_t k = 0; ok && k < n; ++k) {
            long long offset;
            const char *code;
            PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
            ok = PyTuple_Check(item) && PyArg_ParseTuple(item, "Ls", &offset, &code)
                 && offset >= 0 && strlen(code) == 1 && strchr("fdbBhHiIqQ", code[0]) != NULL;
            if (ok) {
                const int size = strchr("bB", code[0]) ? 1 : strchr("hH", code[0]) ? 2
                                 : strchr("fiI", code[0]) ? 4 : 8;
                ok = offset + size <= nbytes;
                c->offsets[k] = (int32_t)offset;
                c->codes[k] = code[0];
            }
        }
        Py_DECREF(seq);
        if (!ok) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "fields: (offset, code) pairs of struct codes "
                                "fdbBhHiIqQ inside the message");
            goto fail;
        }
        c->nfields = (int)n;
    }
    c->scratch = PyMem_Calloc(1, (size_t)box_words * 4);
    if (c->scratch == NULL) { PyErr_NoMemory(); goto fail; }
    Py_INCREF(make_pool); c->pool.make = make_pool;
    Py_INCREF(single); c->single = single;
    return (PyObject *)c;
fail:
    Py_DECREF(c);
    return NULL;
}

/* Pack a tuple by the fields into scratch: 1 done, 0 not taken here (no error set). */
static int pack(BoxCaller *c, PyObject *tuple) {
    if (c->nfields == 0 || PyTuple_GET_SIZE(tuple) != c->nfields) return 0;
    for (int k = 0; k < c->nfields; ++k) {
        PyObject *v = PyTuple_GET_ITEM(tuple, k);
        char *at = c->scratch + c->offsets[k];
        const char code = c->codes[k];
        if (code == 'f' || code == 'd') {
            double d;
            if (PyFloat_CheckExact(v)) d = PyFloat_AS_DOUBLE(v);
            else if (PyLong_CheckExact(v)) {
                d = PyLong_AsDouble(v);
                if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
            } else return 0;
            if (code == 'd') { memcpy(at, &d, 8); continue; }
            if (isfinite(d) && fabs(d) > FLT_MAX) return 0;  /* struct raises: let it say so */
            const float f = (float)d;
            memcpy(at, &f, 4);
            continue;
        }
        if (!PyLong_CheckExact(v)) return 0;  /* (bools, NumPy scalars: struct or NumPy decides) */
        if (code == 'Q') {
            unsigned long long u = PyLong_AsUnsignedLongLong(v);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
            memcpy(at, &u, 8);
            continue;
        }
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        switch (code) {
        case 'b': if (x < -128 || x > 127) return 0; { int8_t y = (int8_t)x; memcpy(at, &y, 1); } break;
        case 'B': if (x < 0 || x > 255) return 0; { uint8_t y = (uint8_t)x; memcpy(at, &y, 1); } break;
        case 'h': if (x < -32768 || x > 32767) return 0; { int16_t y = (int16_t)x; memcpy(at, &y, 2); } break;
        case 'H': if (x < 0 || x > 65535) return 0; { uint16_t y = (uint16_t)x; memcpy(at, &y, 2); } break;
        case 'i': if (x < INT32_MIN || x > INT32_MAX) return 0; { int32_t y = (int32_t)x; memcpy(at, &y, 4); } break;
        case 'I': if (x < 0 || x > UINT32_MAX) return 0; { uint32_t y = (uint32_t)x; memcpy(at, &y, 4); } break;
        default: memcpy(at, &x, 8); break;  /* 'q' */
        }
    }
    return 1;
}

static void clear_words(uint64_t *words, int64_t n) {
    for (int64_t k = 0; k < n; ++k) __atomic_store_n(&words[k], 0, __ATOMIC_RELAXED);
}

static PyObject *caller_call(BoxCaller *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "call() takes 3 arguments (message, seq, spin_ns)");
        return NULL;
    }
    int64_t seq, spin_ns;
    if (number_of(args[1], &seq) < 0 || number_of(args[2], &spin_ns) < 0) return NULL;
    if (seq < 0) {
        PyErr_SetString(PyExc_ValueError, "call(): a message's number is >= 0");
        return NULL;
    }
    if (c->busy) {  /* (its watch gives the GIL away: another thread could come in) */
        PyErr_SetString(PyExc_RuntimeError, "a ring's call() is already waiting in another thread");
        return NULL;
    }
    if (PyTuple_CheckExact(args[0])) {
        if (!pack(c, args[0])) Py_RETURN_NOTIMPLEMENTED;
    } else {
        Py_buffer view;
        if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
        if (view.len != c->nbytes) {
            PyErr_Format(PyExc_ValueError, "call(): a packed message must have %lld bytes, not %zd",
                         (long long)c->nbytes, view.len);
            PyBuffer_Release(&view);
            return NULL;
        }
        memcpy(c->scratch, view.buf, (size_t)c->nbytes);
        PyBuffer_Release(&view);
    }
    /* what can fail comes before the message is sent (the answer's place in the pool) */
    if (pool_reserve(&c->pool, 1, c->response_bytes) < 0) return NULL;
    const uint64_t flag = (uint64_t)((uint32_t)seq | 0x80000000u) << 32;
    const uint32_t *data = (const uint32_t *)c->scratch;
    c->busy = 1;
    c->sent_ns = now();
    clear_words(c->answer, c->answer_words);
    for (int64_t k = 0; k < c->box_words; ++k)
        __atomic_store_n(&c->box[k], flag | data[k], __ATOMIC_RELEASE);
    ring_bell_at(c->bell);
    /* the record (a view of the answer's place) made while the device works, not after the
     * answer (NumPy takes about 0.1 µs for one). Should that fail, the answer is left to come
     * through the slot (as for a call not answered within the spin). */
    PyObject *record = PySequence_GetItem(c->pool.array, c->pool.next);
    if (record == NULL) {
        PyErr_Clear();
        c->busy = 0;
        Py_RETURN_NONE;
    }
    const flagged_words answer = {c->answer, c->answer_words};
    int got = watch_then_release(all_flagged, &answer, (int64_t)(flag >> 32), spin_ns);
    c->busy = 0;
    if (!got) {
        Py_DECREF(record);
        Py_RETURN_NONE;
    }
    c->seen_ns = now();
    clear_words(c->box, c->box_words);
    uint32_t words[MAX_BOX_WORDS];
    for (int64_t k = 0; k < c->answer_words; ++k) words[k] = (uint32_t)c->answer[k];
    memcpy(c->pool.data + c->pool.next++ * c->response_bytes, words, (size_t)c->response_bytes);
    uint64_t handler_ns;
    memcpy(&handler_ns, (const char *)words + ((c->response_bytes + 3) / 4) * 4, 8);
    const int64_t figures[2] = {c->seen_ns - c->sent_ns, (int64_t)handler_ns};
    const Py_ssize_t had = PyByteArray_GET_SIZE(c->single);
    if (PyByteArray_Resize(c->single, had + (Py_ssize_t)sizeof figures) == 0)
        memcpy(PyByteArray_AS_STRING(c->single) + had, figures, sizeof figures);
    else
        PyErr_Clear();  /* (out of memory, or the bytearray exported: the figure is lost, the answer is not) */
    return record;
}

static PyObject *caller_clear(BoxCaller *c, PyObject *unused) {
    if (c->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a ring's call() is waiting in another thread");
        return NULL;
    }
    clear_words(c->box, c->box_words);
    Py_RETURN_NONE;
}

static PyObject *caller_get_sent(BoxCaller *c, void *closure) { return PyLong_FromLongLong(c->sent_ns); }
static PyObject *caller_get_seen(BoxCaller *c, void *closure) { return PyLong_FromLongLong(c->seen_ns); }

static PyObject *caller_get_single(BoxCaller *c, void *closure) { Py_INCREF(c->single); return c->single; }
static int caller_set_single(BoxCaller *c, PyObject *value, void *closure) {
    if (value == NULL || !PyByteArray_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "single must be a bytearray");
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(c->single, value);
    return 0;
}

static PyGetSetDef caller_getset[] = {
    {"sent_ns", (getter)caller_get_sent, NULL, "When the last message was sent (ns).", NULL},
    {"seen_ns", (getter)caller_get_seen, NULL, "When the last answer was seen (ns).", NULL},
    {"single", (getter)caller_get_single, (setter)caller_set_single,
     "The list each answer's (round trip ns, handler ns) is appended to.", NULL},
    {NULL},
};

static PyMethodDef caller_methods[] = {
    {"call", (PyCFunction)(void (*)(void))caller_call, METH_FASTCALL,
     "Send a message through the box and wait for its answer (see the file's comment)."},
    {"clear", (PyCFunction)caller_clear, METH_NOARGS, "Empty the request box."},
    {NULL},
};

static PyTypeObject BoxCallerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_wb_words.BoxCaller",
    .tp_basicsize = sizeof(BoxCaller),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One message at a time through a call box (see the module's source).",
    .tp_new = caller_new,
    .tp_dealloc = (destructor)caller_dealloc,
    .tp_methods = caller_methods,
    .tp_getset = caller_getset,
};

/* ---- Slots (see the file's comment) ---- */
typedef struct {
    PyObject_HEAD
    char *requests, *responses, *stamps;
    int64_t *answered, *head;
    int64_t capacity, request_bytes, response_bytes;
    record_pool pool;
    int busy;
    int64_t *bell;
} Slots;

/* What take() watches for: messages first .. first + count - 1 all answered. `done` and `slot`
 * (the next word to check, and its slot) carry over between polls: each word is checked once. */
typedef struct { const int64_t *words; int64_t capacity, first, count, done, slot; } answered_run;
static int run_answered(const void *at, int64_t unused) {
    answered_run *r = (answered_run *)at;
    const int64_t last = r->first + r->count - 1;
    if (load_acquire(&r->words[last % r->capacity]) != last) return 0;  /* the last first */
    while (r->done < r->count) {
        if (load_acquire(&r->words[r->slot]) != r->first + r->done) return 0;
        ++r->done;
        if (++r->slot == r->capacity) r->slot = 0;
    }
    return 1;
}

static void slots_dealloc(Slots *s) {
    Py_XDECREF(s->pool.make);
    Py_XDECREF(s->pool.array);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *slots_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *requests, *responses, *stamps, *answered, *head, *make_pool, *bell = NULL;
    long long capacity, request_bytes, response_bytes;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Slots() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOOOLLLO|O", &requests, &responses, &stamps, &answered, &head,
                          &capacity, &request_bytes, &response_bytes, &make_pool, &bell))
        return NULL;
    if (capacity < 1 || request_bytes < 1 || response_bytes < 1 || !PyCallable_Check(make_pool)) {
        PyErr_SetString(PyExc_ValueError, "Slots(): a capacity, request and response sizes >= 1, "
                        "and make_pool(need)");
        return NULL;
    }
    Slots *s = (Slots *)type->tp_alloc(type, 0);
    if (s == NULL) return NULL;
    /* (requests, responses and stamps are byte arrays: only the words need alignment) */
    s->requests = PyLong_AsVoidPtr(requests);
    s->responses = PyLong_AsVoidPtr(responses);
    s->stamps = PyLong_AsVoidPtr(stamps);
    if (PyErr_Occurred() || s->requests == NULL || s->responses == NULL || s->stamps == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a null address");
        goto fail;
    }
    if (address_of(answered, (void **)&s->answered) < 0 || address_of(head, (void **)&s->head) < 0
        || bell_of(bell, &s->bell) < 0)
        goto fail;
    s->capacity = capacity; s->request_bytes = request_bytes; s->response_bytes = response_bytes;
    Py_INCREF(make_pool); s->pool.make = make_pool;
    return (PyObject *)s;
fail:
    Py_DECREF(s);
    return NULL;
}

static PyObject *slots_write(Slots *s, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "write() takes 3 arguments (batch, first, next_recv)");
        return NULL;
    }
    int64_t first, next_recv;
    if (number_of(args[1], &first) < 0 || number_of(args[2], &next_recv) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();  /* not a contiguous buffer: the caller's own path says what is wrong */
        Py_RETURN_NONE;
    }
    const int64_t n = view.ndim == 1 ? (int64_t)view.shape[0] : 0;
    if (view.itemsize != s->request_bytes || n < 1 || next_recv < 0 || first < next_recv
        || n > s->capacity - (first - next_recv)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const int64_t sent = now(), size = s->request_bytes, lo = first % s->capacity;
    const int64_t part = n < s->capacity - lo ? n : s->capacity - lo;
    memcpy(s->requests + lo * size, view.buf, (size_t)(part * size));
    if (part < n) memcpy(s->requests, (const char *)view.buf + part * size, (size_t)((n - part) * size));
    PyBuffer_Release(&view);
    return PyLong_FromLongLong((long long)sent);
}

/* take()'s copy of a run of answers (all there): the answers into the pool's next places,
 * the stamps into bytes; (answers, stamps, seen ns). */
static PyObject *copy_run(Slots *s, int64_t first, int64_t count) {
    const int64_t seen = now(), lo = first % s->capacity;
    const int64_t part = count < s->capacity - lo ? count : s->capacity - lo;
    const int64_t rb = s->response_bytes;
    char *to = s->pool.data + s->pool.next * rb;
    memcpy(to, s->responses + lo * rb, (size_t)(part * rb));
    if (part < count) memcpy(to + part * rb, s->responses, (size_t)((count - part) * rb));
    PyObject *stamps = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * 16));
    if (stamps == NULL) return NULL;
    char *st = PyBytes_AS_STRING(stamps);
    memcpy(st, s->stamps + lo * 16, (size_t)(part * 16));
    if (part < count) memcpy(st + part * 16, s->stamps, (size_t)((count - part) * 16));
    PyObject *answers = PySequence_GetSlice(s->pool.array, s->pool.next, s->pool.next + count);
    if (answers == NULL) {
        Py_DECREF(stamps);
        return NULL;
    }
    s->pool.next += count;
    return Py_BuildValue("(NNL)", answers, stamps, (long long)seen);
}

static PyObject *slots_take(Slots *s, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "take() takes 4 arguments (first, count, head, spin_ns)");
        return NULL;
    }
    int64_t first, count, head, spin_ns;
    if (number_of(args[0], &first) < 0 || number_of(args[1], &count) < 0
        || number_of(args[2], &head) < 0 || number_of(args[3], &spin_ns) < 0) return NULL;
    if (first < 0 || count < 1 || count > s->capacity) {
        PyErr_SetString(PyExc_ValueError, "take(): a message number >= 0 and 1 to capacity answers");
        return NULL;
    }
    if (s->busy) {  /* (its watch gives the GIL away, make_pool runs Python: another thread could come in) */
        PyErr_SetString(PyExc_RuntimeError, "a ring's recv() is already waiting in another thread");
        return NULL;
    }
    s->busy = 1;  /* from here on: the places reserved are this call's */
    if (pool_reserve(&s->pool, (Py_ssize_t)count, s->response_bytes) < 0) {  /* before anything waits */
        s->busy = 0;
        return NULL;
    }
    if (__atomic_load_n(s->head, __ATOMIC_RELAXED) != head) {
        __atomic_store_n(s->head, head, __ATOMIC_RELEASE);  /* a send cut short: publish it */
        ring_bell_at(s->bell);
    }
    answered_run run = {s->answered, s->capacity, first, count, 0, first % s->capacity};
    int got = watch_then_release(run_answered, &run, 0, spin_ns);
    if (!got) {
        s->busy = 0;
        Py_RETURN_NONE;
    }
    PyObject *out = copy_run(s, first, count);
    s->busy = 0;
    return out;
}

static PyMethodDef slots_methods[] = {
    {"write", (PyCFunction)(void (*)(void))slots_write, METH_FASTCALL,
     "Copy a batch of requests into the slots, unpublished (see the file's comment)."},
    {"take", (PyCFunction)(void (*)(void))slots_take, METH_FASTCALL,
     "Watch for a run of answers and copy them out (see the file's comment)."},
    {NULL},
};

static PyTypeObject SlotsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_wb_words.Slots",
    .tp_basicsize = sizeof(Slots),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A ring's slots: batches written, runs of answers taken (see the module's source).",
    .tp_new = slots_new,
    .tp_dealloc = (destructor)slots_dealloc,
    .tp_methods = slots_methods,
};

static PyMethodDef methods[] = {
    {"publish_wait", (PyCFunction)(void (*)(void))publish_wait, METH_FASTCALL,
     "Store a word, watch another, copy the answer (see the file's comment)."},
    {"wait_word", (PyCFunction)(void (*)(void))wait_word, METH_FASTCALL,
     "Watch a word until it holds a value, for at most spin_ns."},
    {"ring_bell", (PyCFunction)ring_bell, METH_O,
     "Wake a ring's sleeping dispatcher after publishing (see the file's comment)."},
    {"run_length", (PyCFunction)(void (*)(void))run_length, METH_FASTCALL,
     "How many consecutive words hold consecutive numbers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wb_words", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wb_words(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddType(m, &BoxCallerType) < 0 || PyModule_AddType(m, &SlotsType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
