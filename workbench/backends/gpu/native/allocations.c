/* Device allocations and frees seen in C: the allocator the GPU backend puts
 * around CuPy's pool while memory is tracked (workbench/backends/gpu/
 * allocations.py builds this file through native_build.py, once per
 * machine, and keeps its Python watcher where it cannot).
 *
 * memory_type(BaseMemory, MemoryPointer) -> type
 *   Makes (once per pair of classes) WatchedMemory, a subclass of CuPy's
 *   BaseMemory created from the type passed in (not instantiable from Python). An instance holds the pool's MemoryPointer (the block)
 *   and its ptr/size/device_id are the block's, set through BaseMemory's own
 *   attributes. No GC support, like BaseMemory (cython.no_gc): the collector
 *   never clears it, so its block is released in its dealloc and nowhere else;
 *   it refers only to the block, the allocator and two ints, none of which
 *   refers back to memory objects, so it is never part of a cycle.
 *
 * Allocator(memory_type, wrapped=None): callable as CuPy's allocator,
 *   allocator(size) -> MemoryPointer. Calls wrapped(size) (the pool's malloc); a block with a
 *   null pointer (size 0) is handed on as it is; any other is wrapped in a
 *   WatchedMemory and a new MemoryPointer(memory, 0), and, when the block is
 *   on the allocator's device, reported.
 *   .wrapped: the allocator blocks come from (settable).
 *   .configure(device, on_alloc, on_free, sink): what reports go where.
 *     on_alloc(ptr, size), on_free(ptr, size): Python callables or None
 *     (errors they raise are dropped). sink: None or the tuple
 *     (records, session, reserved, count_now, count_every, kinds, frame_kind,
 *      depth): records, a list, gets for each allocation the tuple
 *       (size, time, session.cell, frames, reserved(), ptr)
 *     and for each free
 *       (ptr, size, time, session.cell)
 *     where time is time.perf_counter()'s clock and frames the innermost
 *     `depth` frames of the caller whose file `kinds` (a dict: file name ->
 *     0 user, 1 library, 2 driver; missing names are classified by
 *     frame_kind(name) and added) says is the user's, as (code, f_lasti)
 *     pairs; the walk stops at a driver frame. When len(records) reaches
 *     count_every after an allocation, count_now() is called.
 *   A WatchedMemory's dealloc reports the free (to the allocator that made
 *   it, when on its device) BEFORE releasing the block, so a listener hears
 *   of a free before any allocation that reuses the address.
 * now() -> float: the records' clock (time.perf_counter's: CLOCK_MONOTONIC).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define MAX_DEPTH 16


/* The fields a WatchedMemory has after BaseMemory's. */
typedef struct {
    PyObject *block;        /* the pool's MemoryPointer */
    PyObject *allocator;    /* the Allocator to report the free to; NULL: none */
    PyObject *ptr;          /* ints, as reported */
    PyObject *size;
    long device;
} Fields;

/* One WatchedMemory type per (BaseMemory, MemoryPointer) pair; kept for good. */
typedef struct Kind {
    struct Kind *next;
    PyTypeObject *type;      /* WatchedMemory */
    PyTypeObject *base;      /* BaseMemory */
    PyObject *pointer;       /* MemoryPointer */
    PyObject *set_ptr, *set_size, *set_device;   /* BaseMemory's attribute descriptors */
    PyObject *get_ptr, *get_mem, *get_device;    /* MemoryPointer's, where it has them, or NULL */
    Py_ssize_t offset;       /* of the Fields */
    int decref_type;         /* must our dealloc drop the instance's reference to its heap type? */
} Kind;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *wrapped;      /* the allocator blocks come from, or NULL */
    long device;            /* allocations on this device are reported */
    PyObject *on_alloc;     /* Python listeners, or NULL */
    PyObject *on_free;
    PyObject *sink;         /* the sink tuple, or NULL */
    Py_ssize_t count_every;
    int depth;
    Kind *kind;             /* the memory objects it makes */
    PyObject *last_frames;  /* the last frames captured (a tuple), or NULL */
    int last_lastis[MAX_DEPTH];
} Allocator;

static Kind *kinds = NULL;
static PyObject *empty_tuple = NULL, *zero = NULL;
static PyObject *s_ptr = NULL, *s_mem = NULL, *s_size = NULL, *s_device_id = NULL, *s_cell = NULL;

static Kind *kind_of(PyTypeObject *type) {
    for (Kind *k = kinds; k != NULL; k = k->next)
        if (k->type == type) return k;
    return NULL;
}

#define FIELDS(k, o) ((Fields *)((char *)(o) + (k)->offset))

static PyObject *now_object(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return PyFloat_FromDouble((double)ns / 1e9);   /* as time.perf_counter() rounds it */
}

static int frame_lasti(PyFrameObject *frame) {
#if PY_VERSION_HEX >= 0x030B0000
    return PyFrame_GetLasti(frame);
#else
    return frame->f_lasti < 0 ? -1 : frame->f_lasti * (int)sizeof(_Py_CODEUNIT);
#endif
}

/* The records and their frames are taken off the garbage collector's list
 * (PyObject_GC_UnTrack): they hold ints, floats, None and code objects, none
 * of which refers back to a record, so they are never part of a cycle, and a
 * collection then need not walk the hundreds of thousands of them the tracker
 * may keep (what they refer to counts as referenced, so nothing is freed
 * early). */

/* The caller's user frames as ((code, lasti), ...); NULL with an error set.
 * Allocations in a loop come from the same frames again and again: when they
 * match the last capture, its tuple is handed out again (tuples are immutable,
 * so the record is the same as a new one), which saves making three. */
static PyObject *capture(Allocator *self, PyObject *kinds, PyObject *frame_kind) {
    PyObject *codes[MAX_DEPTH];
    int lastis[MAX_DEPTH];
    int n = 0, depth = self->depth;
    PyFrameObject *frame = PyEval_GetFrame();   /* borrowed */
    Py_XINCREF(frame);
    while (frame != NULL && n < depth) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        PyObject *filename = code->co_filename;
        long kind;
        PyObject *known = PyDict_GetItemWithError(kinds, filename);
        if (known != NULL) {
            kind = PyLong_AsLong(known);
        } else if (PyErr_Occurred()) {
            kind = -1;
        } else {
            PyObject *made = PyObject_CallOneArg(frame_kind, filename);
            if (made == NULL || PyDict_SetItem(kinds, filename, made) < 0) {
                kind = -1;
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "frame_kind failed");
            } else {
                kind = PyLong_AsLong(made);
            }
            Py_XDECREF(made);
        }
        if (kind == -1 && PyErr_Occurred()) {
            Py_DECREF(code);
            goto fail;
        }
        if (kind == 0) {
            codes[n] = (PyObject *)code;   /* keeps the reference */
            lastis[n++] = frame_lasti(frame);
        } else {
            Py_DECREF(code);
            if (kind == 2) break;   /* the notebook kernel, test runner...: nothing below is the user's */
        }
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    Py_XDECREF(frame);
    frame = NULL;
    PyObject *last = self->last_frames;
    if (last != NULL && PyTuple_GET_SIZE(last) == n) {
        int same = 1;
        for (int i = 0; i < n && same; ++i) {
            PyObject *pair = PyTuple_GET_ITEM(last, i);
            same = PyTuple_GET_ITEM(pair, 0) == codes[i] && self->last_lastis[i] == lastis[i];
        }
        if (same) {
            for (int i = 0; i < n; ++i) Py_DECREF(codes[i]);
            Py_INCREF(last);
            return last;
        }
    }
    PyObject *frames = PyTuple_New(n);
    if (frames == NULL) goto fail;
    for (int i = 0; i < n; ++i) {
        PyObject *pair = PyTuple_New(2), *lasti = PyLong_FromLong(lastis[i]);
        if (pair == NULL || lasti == NULL) {
            Py_XDECREF(pair);
            Py_XDECREF(lasti);
            for (int j = i; j < n; ++j) Py_DECREF(codes[j]);
            Py_DECREF(frames);   /* drops the pairs made so far */
            return NULL;
        }
        PyTuple_SET_ITEM(pair, 0, codes[i]);   /* steals the code's reference */
        PyTuple_SET_ITEM(pair, 1, lasti);
        PyTuple_SET_ITEM(frames, i, pair);
        PyObject_GC_UnTrack(pair);   /* see above capture() */
    }
    PyObject_GC_UnTrack(frames);
    /* Only now, with nothing in between that could run Python code (a collection
     * started by the allocations above may allocate again, through us). */
    for (int i = 0; i < n; ++i) self->last_lastis[i] = lastis[i];
    Py_INCREF(frames);
    Py_XSETREF(self->last_frames, frames);
    return frames;
fail:
    Py_XDECREF(frame);
    for (int i = 0; i < n; ++i) Py_DECREF(codes[i]);
    return NULL;
}

static PyObject *cell_of(PyObject *session) {
    PyObject *cell = PyObject_GetAttr(session, s_cell);
    if (cell == NULL) {
        PyErr_Clear();
        Py_INCREF(Py_None);
        cell = Py_None;
    }
    return cell;
}

/* Drops the error a listener or a count raised (they never break allocating
 * or freeing); a Ctrl-C (anything not an Exception) is raised again at the next
 * chance instead of being lost. */
static void drop_error(void) {
    int interrupt = !PyErr_ExceptionMatches(PyExc_Exception);
    PyErr_Clear();
    if (interrupt) PyErr_SetInterrupt();
}

/* Listeners never break allocating or freeing: their errors are dropped. */
static void call_listener(PyObject *listener, PyObject *ptr, PyObject *size) {
    PyObject *args[2] = {ptr, size};
    Py_INCREF(listener);   /* configure() may replace it meanwhile */
    PyObject *r = PyObject_Vectorcall(listener, args, 2, NULL);
    Py_DECREF(listener);
    if (r == NULL) drop_error();
    else Py_DECREF(r);
}

static void report_alloc(Allocator *self, PyObject *ptr, PyObject *size) {
    PyObject *sink = self->sink;
    if (sink != NULL) {
        Py_INCREF(sink);   /* holds its items while Python code runs */
        PyObject *records = PyTuple_GET_ITEM(sink, 0), *session = PyTuple_GET_ITEM(sink, 1);
        PyObject *reserved = PyTuple_GET_ITEM(sink, 2), *count_now = PyTuple_GET_ITEM(sink, 3);
        PyObject *kinds = PyTuple_GET_ITEM(sink, 5), *frame_kind = PyTuple_GET_ITEM(sink, 6);
        PyObject *after = reserved == Py_None ? NULL : PyObject_CallNoArgs(reserved);
        if (after == NULL) {   /* the pool's total may be unreadable: None, as in Python */
            PyErr_Clear();
            Py_INCREF(Py_None);
            after = Py_None;
        }
        PyObject *t = now_object();
        PyObject *cell = cell_of(session);
        PyObject *frames = capture(self, kinds, frame_kind);
        if (frames == NULL) {   /* a frame that cannot be classified: no frames, the counts still exact */
            PyErr_Clear();
            frames = PyTuple_New(0);
        }
        PyObject *record = (t && frames) ? PyTuple_New(6) : NULL;
        if (record != NULL) {
            Py_INCREF(size);
            Py_INCREF(ptr);
            PyTuple_SET_ITEM(record, 0, size);
            PyTuple_SET_ITEM(record, 1, t);
            PyTuple_SET_ITEM(record, 2, cell);
            PyTuple_SET_ITEM(record, 3, frames);
            PyTuple_SET_ITEM(record, 4, after);
            PyTuple_SET_ITEM(record, 5, ptr);
            PyObject_GC_UnTrack(record);   /* see above capture() */
            if (PyList_Append(records, record) < 0) PyErr_Clear();
            Py_DECREF(record);
        } else {
            PyErr_Clear();
            Py_XDECREF(t);
            Py_DECREF(cell);
            Py_XDECREF(frames);
            Py_DECREF(after);
        }
        if (PyList_GET_SIZE(records) >= self->count_every && count_now != Py_None) {
            PyObject *r = PyObject_CallNoArgs(count_now);
            if (r == NULL) drop_error();
            else Py_DECREF(r);
        }
        Py_DECREF(sink);
    }
    if (self->on_alloc != NULL) call_listener(self->on_alloc, ptr, size);
}

static void report_free(Allocator *self, Fields *f) {
    if (f->device != self->device) return;
    PyObject *sink = self->sink;
    if (sink != NULL) {
        Py_INCREF(sink);
        PyObject *records = PyTuple_GET_ITEM(sink, 0);
        PyObject *t = now_object();
        PyObject *cell = cell_of(PyTuple_GET_ITEM(sink, 1));
        PyObject *record = t ? PyTuple_New(4) : NULL;
        if (record != NULL) {
            Py_INCREF(f->ptr);
            Py_INCREF(f->size);
            PyTuple_SET_ITEM(record, 0, f->ptr);
            PyTuple_SET_ITEM(record, 1, f->size);
            PyTuple_SET_ITEM(record, 2, t);
            PyTuple_SET_ITEM(record, 3, cell);
            PyObject_GC_UnTrack(record);
            if (PyList_Append(records, record) < 0) PyErr_Clear();
            Py_DECREF(record);
        } else {
            PyErr_Clear();
            Py_XDECREF(t);
            Py_DECREF(cell);
        }
        Py_DECREF(sink);
    }
    if (self->on_free != NULL) call_listener(self->on_free, f->ptr, f->size);
}

/* ---- WatchedMemory ----------------------------------------------------------------- */

static void memory_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    Kind *k = kind_of(tp);
    if (k == NULL) {   /* cannot happen: only this file makes instances */
        Py_FatalError("_wb_allocations: a WatchedMemory of an unknown type");
    }
    Fields *f = FIELDS(k, self);
    if (f->allocator != NULL && f->ptr != NULL && f->size != NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);   /* a dealloc may run while an error is set */
        report_free((Allocator *)f->allocator, f);
        PyErr_Restore(type, value, traceback);
    }
    Py_CLEAR(f->block);   /* back to the pool only now, after the listeners heard of the free */
    Py_CLEAR(f->allocator);
    Py_CLEAR(f->ptr);
    Py_CLEAR(f->size);
    k->base->tp_dealloc(self);
    if (k->decref_type) Py_DECREF(tp);
}

static PyType_Slot memory_slots[] = {
    {Py_tp_dealloc, (void *)memory_dealloc},
    {Py_tp_doc, (void *)"A block of the wrapped allocator, as CuPy's memory object "
                        "(ptr, size, device_id are the block's)."},
    {0, NULL},
};

static PyType_Spec memory_spec = {
    "workbench.backends._wb_allocations.WatchedMemory", 0, 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, memory_slots,
};

/* A data descriptor of `type` read directly, or NULL (no error) where there is none. */
static PyObject *data_descriptor(PyTypeObject *type, const char *name) {
    PyObject *d = PyObject_GetAttrString((PyObject *)type, name);   /* a descriptor gives itself */
    if (d == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (Py_TYPE(d)->tp_descr_get == NULL || Py_TYPE(d)->tp_descr_set == NULL) Py_CLEAR(d);
    return d;
}

/* obj.name, through `descr` when obj's type is exactly `type` (the same as a look-up then). */
static PyObject *read_attribute(PyObject *obj, PyObject *type, PyObject *descr, PyObject *name) {
    if (descr != NULL && (PyObject *)Py_TYPE(obj) == type)
        return Py_TYPE(descr)->tp_descr_get(descr, obj, type);
    return PyObject_GetAttr(obj, name);
}

static PyObject *descriptor(PyTypeObject *type, const char *name) {
    PyObject *d = PyObject_GetAttrString((PyObject *)type, name);
    if (d != NULL && Py_TYPE(d)->tp_descr_set == NULL) {
        PyErr_Format(PyExc_TypeError, "%s.%s cannot be set", type->tp_name, name);
        Py_CLEAR(d);
    }
    return d;
}

static int set_attribute(PyObject *descr, PyObject *obj, PyObject *value) {
    return Py_TYPE(descr)->tp_descr_set(descr, obj, value);
}

static PyObject *new_memory(Kind *k) {
    return k->base->tp_new(k->type, empty_tuple, NULL);   /* BaseMemory's new (ours is disabled) */
}

static PyObject *make_memory_type(PyObject *module, PyObject *args) {
    PyObject *base, *pointer;
    if (!PyArg_ParseTuple(args, "O!O:memory_type", &PyType_Type, &base, &pointer)) return NULL;
    for (Kind *k = kinds; k != NULL; k = k->next) {
        if ((PyObject *)k->base == base && k->pointer == pointer) {
            Py_INCREF(k->type);
            return (PyObject *)k->type;
        }
    }
    PyTypeObject *b = (PyTypeObject *)base;
    if (b->tp_flags & Py_TPFLAGS_HAVE_GC) {   /* the design relies on no GC (see the top) */
        PyErr_Format(PyExc_TypeError, "%s supports garbage collection: not the BaseMemory expected",
                     b->tp_name);
        return NULL;
    }
    if (b->tp_new == NULL || b->tp_dealloc == NULL) {
        PyErr_Format(PyExc_TypeError, "%s cannot be made or freed from C", b->tp_name);
        return NULL;
    }
    Kind *k = PyMem_RawCalloc(1, sizeof(Kind));
    if (k == NULL) return PyErr_NoMemory();
    k->set_ptr = descriptor(b, "ptr");
    k->set_size = descriptor(b, "size");
    k->set_device = descriptor(b, "device_id");
    if (PyType_Check(pointer)) {   /* CuPy's MemoryPointer (final, no __dict__): read without look-ups */
        k->get_ptr = data_descriptor((PyTypeObject *)pointer, "ptr");
        k->get_mem = data_descriptor((PyTypeObject *)pointer, "mem");
        k->get_device = data_descriptor((PyTypeObject *)pointer, "device_id");
    }
    if (k->set_ptr == NULL || k->set_size == NULL || k->set_device == NULL) goto fail;
    Py_ssize_t align = (Py_ssize_t)sizeof(void *);
    k->offset = (b->tp_basicsize + align - 1) / align * align;
    memory_spec.basicsize = (int)(k->offset + (Py_ssize_t)sizeof(Fields));
    PyObject *made = PyType_FromSpecWithBases(&memory_spec, base);
    if (made == NULL) goto fail;
    Py_INCREF(base);
    Py_INCREF(pointer);
    k->type = (PyTypeObject *)made;
    k->base = b;
    k->pointer = pointer;
    k->next = kinds;
    kinds = k;   /* from here on its instances can be freed */
    /* A heap type's instance holds a reference to its type. Whether BaseMemory's
     * dealloc drops it depends on how it was built (Cython: not for a static
     * type): one instance tells. */
    Py_ssize_t before = Py_REFCNT(made);
    PyObject *probe = new_memory(k);
    if (probe == NULL) return NULL;   /* the kind stays, unusable only for this error's cause */
    Py_DECREF(probe);
    Py_ssize_t after = Py_REFCNT(made);
    if (after == before + 1) {
        k->decref_type = 1;
        Py_DECREF(made);
    } else if (after != before) {
        PyErr_SetString(PyExc_RuntimeError, "cannot tell how BaseMemory's dealloc treats its type");
        return NULL;
    }
    Py_INCREF(made);   /* one for the list of kinds, one for the caller */
    return made;
fail:
    Py_XDECREF(k->set_ptr);
    Py_XDECREF(k->set_size);
    Py_XDECREF(k->set_device);
    Py_XDECREF(k->get_ptr);
    Py_XDECREF(k->get_mem);
    Py_XDECREF(k->get_device);
    PyMem_RawFree(k);
    return NULL;
}

/* ---- Allocator --------------------------------------------------------------------- */

/* The block wrapped for CuPy (steals `block`); NULL with an error set. */
static PyObject *wrap_block(Allocator *self, PyObject *block) {
    PyObject *ptr = NULL, *size = NULL, *device_o = NULL, *memory = NULL, *result = NULL;
    Kind *k = self->kind;
    ptr = read_attribute(block, k->pointer, k->get_ptr, s_ptr);
    if (ptr == NULL) goto done;
    int nonzero = PyObject_IsTrue(ptr);
    if (nonzero < 0) goto done;
    if (!nonzero) {   /* size 0: nothing allocated, nothing to report */
        result = block;
        block = NULL;
        goto done;
    }
    PyObject *mem = read_attribute(block, k->pointer, k->get_mem, s_mem);
    if (mem == NULL) goto done;
    size = PyObject_GetAttr(mem, s_size);   /* the pool's block (rounded up), as used_bytes() counts it */
    Py_DECREF(mem);
    if (size == NULL) goto done;
    device_o = read_attribute(block, k->pointer, k->get_device, s_device_id);
    if (device_o == NULL) goto done;
    long device = PyLong_AsLong(device_o);
    if (device == -1 && PyErr_Occurred()) goto done;
    memory = new_memory(k);
    if (memory == NULL) goto done;
    Fields *f = FIELDS(k, memory);
    f->block = block;   /* from here on the memory object releases the block */
    block = NULL;
    Py_INCREF(ptr);
    f->ptr = ptr;
    Py_INCREF(size);
    f->size = size;
    f->device = device;
    if (set_attribute(k->set_ptr, memory, ptr) < 0 || set_attribute(k->set_size, memory, size) < 0
        || set_attribute(k->set_device, memory, device_o) < 0)
        goto done;
    PyObject *args[2] = {memory, zero};
    result = PyObject_Vectorcall(k->pointer, args, 2, NULL);
    if (result == NULL) goto done;   /* not reported: its dealloc reports no free either */
    Py_INCREF(self);
    f->allocator = (PyObject *)self;
    if (device == self->device) report_alloc(self, ptr, size);
done:
    Py_XDECREF(block);
    Py_XDECREF(memory);
    Py_XDECREF(ptr);
    Py_XDECREF(size);
    Py_XDECREF(device_o);
    return result;
}

static PyObject *allocator_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf,
                                      PyObject *kwnames) {
    Allocator *self = (Allocator *)self_;
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "allocator(size) takes the size only");
        return NULL;
    }
    if (self->wrapped == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the allocator has no allocator to take blocks from");
        return NULL;
    }
    PyObject *wrapped = self->wrapped;
    /* (an allocator that calls this one again would otherwise recurse in C without end) */
    if (Py_EnterRecursiveCall(" in the workbench's allocator")) return NULL;
    Py_INCREF(wrapped);
    PyObject *block = PyObject_Vectorcall(wrapped, args, 1, NULL);   /* CuPy's errors as they are */
    Py_DECREF(wrapped);
    Py_LeaveRecursiveCall();
    if (block == NULL) return NULL;
    return wrap_block(self, block);
}

static PyObject *allocator_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"memory_type", "wrapped", NULL};
    PyObject *memory, *wrapped = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:Allocator", names, &memory, &wrapped))
        return NULL;
    Kind *kind = PyType_Check(memory) ? kind_of((PyTypeObject *)memory) : NULL;
    if (kind == NULL) {
        PyErr_SetString(PyExc_TypeError, "Allocator(memory_type, wrapped): a type made by memory_type()");
        return NULL;
    }
    Allocator *self = (Allocator *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->kind = kind;
    self->vectorcall = allocator_vectorcall;
    self->device = -1;
    self->count_every = PY_SSIZE_T_MAX;
    self->depth = 0;
    if (wrapped != Py_None) {
        Py_INCREF(wrapped);
        self->wrapped = wrapped;
    }
    return (PyObject *)self;
}

static int allocator_traverse(Allocator *self, visitproc visit, void *arg) {
    Py_VISIT(self->wrapped);
    Py_VISIT(self->on_alloc);
    Py_VISIT(self->on_free);
    Py_VISIT(self->sink);
    Py_VISIT(self->last_frames);
    return 0;
}

static int allocator_clear(Allocator *self) {
    Py_CLEAR(self->wrapped);
    Py_CLEAR(self->on_alloc);
    Py_CLEAR(self->on_free);
    Py_CLEAR(self->sink);
    Py_CLEAR(self->last_frames);
    return 0;
}

static void allocator_dealloc(Allocator *self) {
    PyObject_GC_UnTrack(self);
    allocator_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *optional(PyObject *value) {
    if (value == Py_None) return NULL;
    Py_INCREF(value);
    return value;
}

static PyObject *allocator_configure(Allocator *self, PyObject *args) {
    long device;
    PyObject *on_alloc, *on_free, *sink;
    if (!PyArg_ParseTuple(args, "lOOO:configure", &device, &on_alloc, &on_free, &sink)) return NULL;
    Py_ssize_t count_every = PY_SSIZE_T_MAX;
    long depth = 0;
    if (sink != Py_None) {
        if (!PyTuple_Check(sink) || PyTuple_GET_SIZE(sink) != 8
            || !PyList_Check(PyTuple_GET_ITEM(sink, 0)) || !PyDict_Check(PyTuple_GET_ITEM(sink, 5))) {
            PyErr_SetString(PyExc_TypeError, "sink: (records list, session, reserved, count_now, "
                                             "count_every, kinds dict, frame_kind, depth)");
            return NULL;
        }
        count_every = PyLong_AsSsize_t(PyTuple_GET_ITEM(sink, 4));
        depth = PyLong_AsLong(PyTuple_GET_ITEM(sink, 7));
        if (PyErr_Occurred()) return NULL;
        if (depth < 1 || depth > MAX_DEPTH) {
            PyErr_Format(PyExc_ValueError, "depth must be 1 to %d", MAX_DEPTH);
            return NULL;
        }
    }
    self->device = device;
    self->count_every = count_every;
    self->depth = (int)depth;
    Py_XSETREF(self->on_alloc, optional(on_alloc));
    Py_XSETREF(self->on_free, optional(on_free));
    Py_XSETREF(self->sink, optional(sink));
    Py_RETURN_NONE;
}

static PyObject *allocator_get_wrapped(Allocator *self, void *closure) {
    if (self->wrapped == NULL) Py_RETURN_NONE;
    Py_INCREF(self->wrapped);
    return self->wrapped;
}

static int allocator_set_wrapped(Allocator *self, PyObject *value, void *closure) {
    Py_XSETREF(self->wrapped, value == NULL ? NULL : optional(value));
    return 0;
}

static PyObject *allocator_get_device(Allocator *self, void *closure) {
    return PyLong_FromLong(self->device);
}

static PyMethodDef allocator_methods[] = {
    {"configure", (PyCFunction)allocator_configure, METH_VARARGS,
     "configure(device, on_alloc, on_free, sink): where reports go (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef allocator_getset[] = {
    {"wrapped", (getter)allocator_get_wrapped, (setter)allocator_set_wrapped,
     "The allocator blocks come from (None: none yet).", NULL},
    {"device", (getter)allocator_get_device, NULL, "The device whose allocations are reported.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject AllocatorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "workbench.backends._wb_allocations.Allocator",
    .tp_basicsize = sizeof(Allocator),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "CuPy's allocator around another one: allocator(size) -> MemoryPointer.",
    .tp_new = allocator_new,
    .tp_dealloc = (destructor)allocator_dealloc,
    .tp_traverse = (traverseproc)allocator_traverse,
    .tp_clear = (inquiry)allocator_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Allocator, vectorcall),
    .tp_methods = allocator_methods,
    .tp_getset = allocator_getset,
};

/* ---- module ------------------------------------------------------------------------ */

static PyObject *now(PyObject *module, PyObject *unused) {
    return now_object();
}

static PyMethodDef methods[] = {
    {"memory_type", make_memory_type, METH_VARARGS,
     "memory_type(BaseMemory, MemoryPointer) -> the WatchedMemory type (made once per pair)."},
    {"now", now, METH_NOARGS, "The records' clock: time.perf_counter()'s."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_wb_allocations", "Device allocations seen in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__wb_allocations(void) {
    if (empty_tuple == NULL) {
        empty_tuple = PyTuple_New(0);
        zero = PyLong_FromLong(0);
        s_ptr = PyUnicode_InternFromString("ptr");
        s_mem = PyUnicode_InternFromString("mem");
        s_size = PyUnicode_InternFromString("size");
        s_device_id = PyUnicode_InternFromString("device_id");
        s_cell = PyUnicode_InternFromString("cell");
        if (!empty_tuple || !zero || !s_ptr || !s_mem || !s_size || !s_device_id || !s_cell)
            return NULL;
    }
    if (PyType_Ready(&AllocatorType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    Py_INCREF(&AllocatorType);
    if (PyModule_AddObject(m, "Allocator", (PyObject *)&AllocatorType) < 0) {
        Py_DECREF(&AllocatorType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
