/* CUPTI's kernel records for the launch timing log, collected in C (see
 * workbench/backends/gpu/native_cupti.py, which builds this file once per machine
 * against CUPTI's headers, and gpu/cupti.py, which uses it and falls back
 * to cupti-python where it cannot).
 *
 * Why C: CUPTI hands its activity buffers back on a thread of its own. Through
 * cupti-python every record becomes a Python object on that thread, under the
 * GIL, and every buffer is a fresh allocation that CUPTI zeroes on the
 * launching thread the first time it writes to it (64 MiB: about 50 ms, paid
 * by the first launches after every read of the log). Here the callbacks take
 * no GIL: a finished buffer's kernel records are copied into a compact array
 * (correlation id, start, end, name), the buffer is zeroed on CUPTI's thread
 * (only the part CUPTI wrote) and handed out again, and CUPTI is told the
 * buffers come zeroed (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER).
 *
 * start(libcupti_path, buffer_bytes): load libcupti, register, enable kernel records.
 * enable() / disable(): record kernels launched from now on, or not.
 * take(forced=True) -> [(correlation id, symbol, start ns, end ns), ...] sorted by
 *   correlation id: the records of kernels finished since the last take (flushes
 *   CUPTI's buffers; forced: the one being filled too).
 * timestamp() -> int: CUPTI's clock now (cuptiGetTimestamp).
 * dropped() -> int: records not kept (past 4 Mi records unread the oldest half
 *   goes; or memory ran out).
 *
 * The header is used for its types and constants only; the functions are
 * looked up in the library given to start(), so the module loads anywhere.
 * A kernel record's start, end, correlationId and name sit at the same
 * offsets in every CUpti_ActivityKernel version from 4 to 10 (the header's
 * structs say so; checked on CUPTI 13.0), and CUPTI writes its newest one.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cupti_activity.h>  /* (not cupti.h: its callback API needs the runtime headers of the same release) */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef CUpti_ActivityKernel4 KernelRecord;

typedef CUptiResult (*register_fn)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*kind_fn)(CUpti_ActivityKind);
typedef CUptiResult (*flush_fn)(uint32_t);
typedef CUptiResult (*next_fn)(uint8_t *, size_t, CUpti_Activity **);
typedef CUptiResult (*attr_fn)(CUpti_ActivityAttribute, size_t *, void *);
typedef CUptiResult (*stamp_fn)(uint64_t *);
typedef CUptiResult (*message_fn)(CUptiResult, const char **);

static struct {
    register_fn register_callbacks;
    kind_fn enable, disable;
    flush_fn flush_all;
    next_fn next_record;
    attr_fn set_attribute;
    stamp_fn get_timestamp;
    message_fn result_string;
} cupti;

typedef struct { uint32_t correlation; const char *name; uint64_t start, end; } Kept;

/* The records kept so far (CUPTI's thread appends, take() empties), and the
 * buffers free for CUPTI to write into, each under its own lock: a launch
 * that needs a buffer never waits for a finished one being read. */
#ifndef MAX_KEPT  /* (tests build with a small one) */
#define MAX_KEPT (1u << 22)   /* 4 Mi records, 128 MiB: beyond, the oldest half goes */
#endif
#define MAX_FREE 16
#define SLACK 4096            /* zeroed past the valid bytes too (nothing promises CUPTI stopped there) */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER, free_lock = PTHREAD_MUTEX_INITIALIZER;
static Kept *kept = NULL;
static size_t kept_count = 0, kept_capacity = 0, dropped_count = 0;
static uint8_t *free_buffers[MAX_FREE];
static int free_count = 0;
static size_t buffer_bytes = 8u << 20;
static int started = 0;
static CUpti_ActivityKind kernel_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
static PyObject *names = NULL;  /* our copy's address (an int) -> str */

/* Kernel names, copied: CUPTI documents no lifetime for a record's name (a
 * module unloaded may free it), so each distinct name is copied once, on
 * CUPTI's thread, and the copies are kept for the life of the process (one
 * per distinct kernel name the process ever ran). An open-addressing table
 * keyed by the text (not CUPTI's address, which a module loaded later may
 * reuse for another name, or a reloaded module change for the same one).
 * Used only under kept_lock. */
typedef struct { uint64_t hash; char *copy; } NameSlot;
static NameSlot *name_slots = NULL;
static size_t name_capacity = 0, name_count = 0;

static uint64_t text_hash(const char *text) {  /* FNV-1a */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)text; *c; ++c) h = (h ^ *c) * 0x100000001b3ull;
    return h;
}

static int names_grow(void) {
    size_t capacity = name_capacity ? name_capacity * 2 : 256;
    NameSlot *slots = (NameSlot *)calloc(capacity, sizeof(NameSlot));
    if (slots == NULL) return -1;
    for (size_t i = 0; i < name_capacity; ++i) {
        if (name_slots[i].copy == NULL) continue;
        size_t j = name_slots[i].hash & (capacity - 1);
        while (slots[j].copy != NULL) j = (j + 1) & (capacity - 1);
        slots[j] = name_slots[i];
    }
    free(name_slots);
    name_slots = slots;
    name_capacity = capacity;
    return 0;
}

static const char *owned_name(const char *name) {
    if (name == NULL) return "";
    if ((name_count + 1) * 2 > name_capacity && names_grow() < 0 && name_count + 1 >= name_capacity)
        return NULL;  /* (a table that could not grow still takes names while it has room) */
    uint64_t h = text_hash(name);
    size_t j = h & (name_capacity - 1);
    for (; name_slots[j].copy != NULL; j = (j + 1) & (name_capacity - 1))
        if (name_slots[j].hash == h && strcmp(name_slots[j].copy, name) == 0) return name_slots[j].copy;
    char *copy = strdup(name);
    if (copy == NULL) return NULL;
    name_slots[j].hash = h;
    name_slots[j].copy = copy;
    name_count++;
    return copy;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    uint8_t *got = NULL;
    pthread_mutex_lock(&free_lock);
    if (free_count > 0) got = free_buffers[--free_count];
    pthread_mutex_unlock(&free_lock);
    if (got == NULL) got = (uint8_t *)calloc(1, buffer_bytes);  /* zeroed, as CUPTI is told */
    *buffer = got;
    *size = got != NULL ? buffer_bytes : 0;
    *max_records = 0;
}

/* Room for `more` records: the array grows, or past MAX_KEPT drops its oldest half. */
static int make_room(size_t more) {
    if (kept_count + more <= kept_capacity) return 0;
    size_t grown = kept_capacity ? kept_capacity : 4096;
    while (grown < kept_count + more && grown < MAX_KEPT) grown *= 2;
    if (grown > MAX_KEPT) grown = MAX_KEPT;
    if (grown > kept_capacity) {
        Kept *bigger = (Kept *)realloc(kept, grown * sizeof(Kept));
        if (bigger != NULL) { kept = bigger; kept_capacity = grown; }
    }
    if (kept_count + more > kept_capacity && kept_count > 0) {
        size_t drop = kept_count / 2 > more ? kept_count / 2 : kept_count;
        memmove(kept, kept + drop, (kept_count - drop) * sizeof(Kept));
        kept_count -= drop;
        dropped_count += drop;
    }
    return kept_count + more <= kept_capacity ? 0 : -1;
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)context; (void)stream;
    /* the buffer's kernel records, read without a lock (CUPTI's calls are its own business) */
    size_t room = valid / sizeof(KernelRecord) + 1, count = 0;
    Kept *got = (Kept *)malloc(room * sizeof(Kept));
    CUpti_Activity *record = NULL;
    size_t lost = 0;  /* (kernel records not kept: no memory to read them into) */
    while (cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        if (got == NULL || count == room) { lost++; continue; }
        const KernelRecord *k = (const KernelRecord *)record;
        got[count].correlation = k->correlationId;
        got[count].name = k->name;  /* (CUPTI's: made ours below) */
        got[count].start = k->start;
        got[count].end = k->end;
        count++;
    }
    if (got != NULL || lost) {
        pthread_mutex_lock(&kept_lock);
        dropped_count += lost;
        size_t kept_now = 0;
        for (size_t i = 0; i < count; ++i) {  /* (names copied before the buffer is handed out again) */
            got[kept_now] = got[i];
            got[kept_now].name = owned_name(got[i].name);
            if (got[kept_now].name != NULL) kept_now++;
            else dropped_count++;
        }
        if (kept_now > 0 && make_room(kept_now) == 0) {
            memcpy(kept + kept_count, got, kept_now * sizeof(Kept));
            kept_count += kept_now;
        } else {
            dropped_count += kept_now;
        }
        pthread_mutex_unlock(&kept_lock);
        free(got);
    }
    size_t zero = valid + SLACK < size ? valid + SLACK : size;
    memset(buffer, 0, zero);  /* here, on CUPTI's thread, rather than on the next launch */
    pthread_mutex_lock(&free_lock);
    if (free_count < MAX_FREE) {
        free_buffers[free_count++] = buffer;
        buffer = NULL;
    }
    pthread_mutex_unlock(&free_lock);
    free(buffer);
}

static PyObject *cupti_error(const char *what, CUptiResult status) {
    const char *message = NULL;
    if (cupti.result_string == NULL || cupti.result_string(status, &message) != CUPTI_SUCCESS || message == NULL)
        message = "unknown error";
    PyErr_Format(PyExc_RuntimeError, "%s: %s (CUPTI error %d)", what, message, (int)status);
    return NULL;
}

static void *symbol(void *library, const char *name, int *missing) {
    void *found = dlsym(library, name);
    if (found == NULL) *missing = 1;
    return found;
}

static PyObject *start(PyObject *self, PyObject *args) {
    const char *path;
    Py_ssize_t bytes;
    if (!PyArg_ParseTuple(args, "sn", &path, &bytes)) return NULL;
    if (started) Py_RETURN_NONE;
    if (bytes < 65536) {
        PyErr_SetString(PyExc_ValueError, "buffer_bytes must be at least 64 KiB");
        return NULL;
    }
    void *library = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (library == NULL) {
        PyErr_Format(PyExc_RuntimeError, "cannot load %s: %s", path, dlerror());
        return NULL;
    }
    int missing = 0;
    cupti.register_callbacks = (register_fn)symbol(library, "cuptiActivityRegisterCallbacks", &missing);
    cupti.enable = (kind_fn)symbol(library, "cuptiActivityEnable", &missing);
    cupti.disable = (kind_fn)symbol(library, "cuptiActivityDisable", &missing);
    cupti.flush_all = (flush_fn)symbol(library, "cuptiActivityFlushAll", &missing);
    cupti.next_record = (next_fn)symbol(library, "cuptiActivityGetNextRecord", &missing);
    cupti.set_attribute = (attr_fn)symbol(library, "cuptiActivitySetAttribute", &missing);
    cupti.get_timestamp = (stamp_fn)symbol(library, "cuptiGetTimestamp", &missing);
    cupti.result_string = (message_fn)dlsym(library, "cuptiGetResultString");
    if (missing) {
        PyErr_Format(PyExc_RuntimeError, "%s lacks the activity API", path);
        return NULL;
    }
    buffer_bytes = (size_t)bytes;
    uint8_t zeroed = 1;
    size_t attr_size = sizeof zeroed;
    CUptiResult status = cupti.set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &attr_size, &zeroed);
    if (status != CUPTI_SUCCESS) return cupti_error("CUPTI refused zeroed buffers", status);
    status = cupti.register_callbacks(buffer_requested, buffer_completed);
    if (status == CUPTI_SUCCESS) {
        status = cupti.enable(kernel_kind);
        if (status == CUPTI_SUCCESS) {
            started = 1;
            Py_RETURN_NONE;
        }
        cupti_error("CUPTI refused kernel activity", status);
    } else {
        cupti_error("CUPTI refused the buffer callbacks", status);
    }
    /* (left as found for a collector after this one: cupti-python's buffers are not zeroed) */
    zeroed = 0;
    cupti.set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &attr_size, &zeroed);
    return NULL;
}

static PyObject *set_enabled(int on) {
    if (!started) {
        PyErr_SetString(PyExc_RuntimeError, "start() first");
        return NULL;
    }
    CUptiResult status = on ? cupti.enable(kernel_kind) : cupti.disable(kernel_kind);
    if (status != CUPTI_SUCCESS) return cupti_error(on ? "cuptiActivityEnable" : "cuptiActivityDisable", status);
    Py_RETURN_NONE;
}

static PyObject *enable(PyObject *self, PyObject *unused) { return set_enabled(1); }
static PyObject *disable(PyObject *self, PyObject *unused) { return set_enabled(0); }

static int by_correlation(const void *a, const void *b) {
    const Kept *p = (const Kept *)a, *q = (const Kept *)b;
    if (p->correlation != q->correlation) return (p->correlation > q->correlation) - (p->correlation < q->correlation);
    return (p->start > q->start) - (p->start < q->start);
}

static PyObject *name_of(const char *name) {
    PyObject *key = PyLong_FromVoidPtr((void *)name);  /* (our copy: never freed, never reused) */
    if (key == NULL) return NULL;
    PyObject *text = PyDict_GetItemWithError(names, key);
    if (text != NULL) {
        Py_DECREF(key);
        Py_INCREF(text);
        return text;
    }
    if (PyErr_Occurred()) { Py_DECREF(key); return NULL; }
    text = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
    if (text != NULL && PyDict_SetItem(names, key, text) < 0) Py_CLEAR(text);
    Py_DECREF(key);
    return text;
}

static PyObject *take(PyObject *self, PyObject *args) {
    int forced = 1;
    if (!PyArg_ParseTuple(args, "|p", &forced)) return NULL;
    if (!started) return PyList_New(0);
    CUptiResult status;
    Py_BEGIN_ALLOW_THREADS
    /* (calls buffer_completed; forced: a buffer still being filled comes back too) */
    status = cupti.flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    Py_END_ALLOW_THREADS
    if (status != CUPTI_SUCCESS) return cupti_error("cuptiActivityFlushAll", status);
    pthread_mutex_lock(&kept_lock);
    Kept *got = kept;
    size_t count = kept_count;
    kept = NULL;
    kept_count = kept_capacity = 0;
    pthread_mutex_unlock(&kept_lock);
    if (count > 1) {
        Py_BEGIN_ALLOW_THREADS
        qsort(got, count, sizeof(Kept), by_correlation);
        Py_END_ALLOW_THREADS
    }
    PyObject *out = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; out != NULL && i < count; ++i) {
        PyObject *name = name_of(got[i].name);
        PyObject *item = name ? Py_BuildValue("(kNKK)", (unsigned long)got[i].correlation, name,
                                              (unsigned long long)got[i].start,
                                              (unsigned long long)got[i].end) : NULL;
        if (item == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    free(got);
    return out;
}

static PyObject *timestamp(PyObject *self, PyObject *unused) {
    if (!started) {
        PyErr_SetString(PyExc_RuntimeError, "start() first");
        return NULL;
    }
    uint64_t now = 0;
    CUptiResult status = cupti.get_timestamp(&now);
    if (status != CUPTI_SUCCESS) return cupti_error("cuptiGetTimestamp", status);
    return PyLong_FromUnsignedLongLong(now);
}

static PyObject *dropped(PyObject *self, PyObject *unused) {
    pthread_mutex_lock(&kept_lock);
    size_t count = dropped_count;
    pthread_mutex_unlock(&kept_lock);
    return PyLong_FromSize_t(count);
}

static PyMethodDef methods[] = {
    {"start", start, METH_VARARGS, "Load libcupti and record kernels (see the file's comment)."},
    {"enable", enable, METH_NOARGS, "Record kernels launched from now on."},
    {"disable", disable, METH_NOARGS, "Stop recording kernels."},
    {"take", take, METH_VARARGS, "take(forced=True): the records of kernels finished since the last take, in launch order."},
    {"timestamp", timestamp, METH_NOARGS, "CUPTI's clock now, in ns."},
    {"dropped", dropped, METH_NOARGS, "Records not kept."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wb_cupti", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wb_cupti(void) {
    names = PyDict_New();
    if (names == NULL) return NULL;
    return PyModule_Create(&module);
}
