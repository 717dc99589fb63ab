/* The call of a compiled entry point for plain arguments, in C (runtime/entry.py, FastEntry).
 *
 * `vm["main"](x)` on a small model was mostly Python: checking each argument, patching the
 * memref descriptors through ctypes, allocating the results, the ctypes call (the W1 MLP at a
 * batch of 1: ~5 us around a 6 us kernel). Here one C function does the same for arguments that
 * are C-contiguous numpy arrays (or NDArrays) of the expected dtype, rank and sizes; anything else
 * (a torch tensor, a strided view, a wrong shape) goes to the Python path, which converts it or
 * explains the mismatch. A destination-passing function (`ex["mm"](a, b, c)`) has no results
 * here: its outputs are arguments like the others.
 *
 * Each call builds its memref descriptors and the packed argument array in its own memory (on
 * the C stack up to MAX_STACK_WORDS), so two Python threads may call one entry point at once:
 * the code runs with the GIL released, and descriptors shared between calls were rewritten by
 * the second call while the first one ran.
 *
 * numpy's array object is read through its first fields (data, nd, dimensions, strides, base,
 * descr, flags: the same in numpy 1.x and 2.x); entry.py checks them on a probe array before
 * it uses this module, and keeps the Python path where they differ.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} ArrayFields;

#define ARRAY_C_CONTIGUOUS 0x0001
#define MAX_RANK 16
#define MAX_SYMBOLS 64
#define MAX_RESULTS 64
#define MAX_STACK_WORDS 1024 /* int64 words of descriptors kept on the stack (8 KB) */
#define MAX_STACK_ARGS 128

/* An MLIR ranked memref descriptor: allocated, aligned, offset, sizes[rank], strides[rank]. */
typedef struct {
    void *allocated;
    void *aligned;
    int64_t offset;
    int64_t dims[];
} Descriptor;

typedef struct {
    Py_ssize_t words;    /* where its descriptor starts in a call's descriptor words */
    int rank;
    PyObject *dtype;     /* the numpy dtype the argument must have (the same object) */
    int64_t plan[MAX_RANK]; /* >= 0: a static size; -(k + 1): symbol k */
    Py_ssize_t itemsize;
    PyObject *site;      /* results: the block cache site (an int) */
} Slot;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void (*fn)(void **);
    Py_ssize_t n_params, n_results;
    Py_ssize_t words;    /* int64 words of all descriptors of a call */
    Slot *slots;
    PyObject *ndarray;   /* numpy.ndarray */
    PyObject *empty;     /* numpy.empty(shape, dtype) */
    PyObject *large;     /* result_array(shape, dtype, site): results of `large_bytes` or more */
    Py_ssize_t large_bytes;
    PyObject *wrap;      /* NDArray */
    PyObject *device;
    PyObject *fallback;  /* the Python path, called with the same arguments */
} FastEntry;

static void set_descriptor(Descriptor *d, int rank, void *data, const int64_t *sizes) {
    int64_t stride = 1;
    d->allocated = data;
    d->aligned = data;
    d->offset = 0;
    for (int i = rank - 1; i >= 0; i--) {
        d->dims[i] = sizes[i];
        d->dims[rank + i] = stride;
        stride *= sizes[i];
    }
}

/* The host array of NDArray `nd` (borrowed: `nd` keeps it) when it is on this entry's device,
 * else NULL (with an exception set only where reading it failed). */
static PyObject *str_device, *str_array;  /* "device", "_array": interned at import */

static PyObject *host_array(FastEntry *self, PyObject *nd) {
    PyObject *device = PyObject_GetAttr(nd, str_device);
    if (device == NULL)
        return NULL;
    int same = device == self->device ? 1 : PyObject_RichCompareBool(device, self->device, Py_EQ);
    Py_DECREF(device);
    if (same <= 0)
        return NULL;
    PyObject *array = PyObject_GetAttr(nd, str_array);
    if (array == NULL)
        return NULL;
    Py_DECREF(array);  /* the NDArray holds it */
    return array == Py_None ? NULL : array;
}

static PyObject *call_fallback(FastEntry *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static PyObject *new_result(FastEntry *self, Slot *slot, const int64_t *sizes) {
    PyObject *shape = PyTuple_New(slot->rank);
    if (shape == NULL)
        return NULL;
    Py_ssize_t nbytes = slot->itemsize;
    for (int d = 0; d < slot->rank; d++) {
        PyObject *n = PyLong_FromLongLong(sizes[d]);
        if (n == NULL) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, d, n);
        nbytes *= (Py_ssize_t)sizes[d];
    }
    PyObject *out;
    if (nbytes >= self->large_bytes) {
        PyObject *argv[3] = {shape, slot->dtype, slot->site};
        out = PyObject_Vectorcall(self->large, argv, 3, NULL);
    } else {
        PyObject *argv[2] = {shape, slot->dtype};
        out = PyObject_Vectorcall(self->empty, argv, 2, NULL);
    }
    Py_DECREF(shape);
    if (out != NULL && (Py_TYPE(out) != (PyTypeObject *)self->ndarray ||
                        !(((ArrayFields *)out)->flags & ARRAY_C_CONTIGUOUS))) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "a result array is not a C-contiguous ndarray");
        return NULL;
    }
    return out;
}

/* The call itself, with its descriptors in `words` and its packed array in `ptrs`. */
static PyObject *call_with(FastEntry *self, PyObject *const *args, size_t nargsf, PyObject *kw,
                           int64_t *words, void **ptrs) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t n_all = self->n_params + self->n_results;
    void **packed = ptrs + n_all;
    int64_t env[MAX_SYMBOLS];
    unsigned char bound[MAX_SYMBOLS] = {0};
    int64_t sizes[MAX_RANK];
    for (Py_ssize_t i = 0; i < n_all; i++) {
        ptrs[i] = words + self->slots[i].words;
        packed[i] = &ptrs[i];
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Slot *slot = &self->slots[i];
        PyObject *a = args[i];
        if (Py_TYPE(a) == (PyTypeObject *)self->wrap) {  /* an NDArray on our device: its array */
            a = host_array(self, a);
            if (a == NULL) {
                if (PyErr_Occurred())
                    return NULL;
                return call_fallback(self, args, nargsf, kw);
            }
        }
        if (Py_TYPE(a) != (PyTypeObject *)self->ndarray)
            return call_fallback(self, args, nargsf, kw);
        ArrayFields *f = (ArrayFields *)a;
        if (f->nd != slot->rank || f->descr != slot->dtype || !(f->flags & ARRAY_C_CONTIGUOUS))
            return call_fallback(self, args, nargsf, kw);
        for (int d = 0; d < slot->rank; d++) {
            int64_t want = slot->plan[d], got = (int64_t)f->dimensions[d];
            if (want >= 0) {
                if (want != got)
                    return call_fallback(self, args, nargsf, kw);
            } else {
                int k = (int)(-want - 1);
                if (bound[k] && env[k] != got)
                    return call_fallback(self, args, nargsf, kw);
                env[k] = got;
                bound[k] = 1;
            }
            sizes[d] = got;
        }
        set_descriptor((Descriptor *)ptrs[i], slot->rank, f->data, sizes);
    }
    PyObject *outs[MAX_RESULTS];
    Py_ssize_t n_out = self->n_results;
    for (Py_ssize_t j = 0; j < n_out; j++) {
        Slot *slot = &self->slots[self->n_params + j];
        for (int d = 0; d < slot->rank; d++) {
            int64_t want = slot->plan[d];
            sizes[d] = want >= 0 ? want : env[-want - 1];
        }
        PyObject *out = new_result(self, slot, sizes);
        if (out == NULL) {
            for (Py_ssize_t k = 0; k < j; k++)
                Py_DECREF(outs[k]);
            return NULL;
        }
        outs[j] = out;
        void *data = ((ArrayFields *)out)->data;
        set_descriptor((Descriptor *)ptrs[self->n_params + j], slot->rank, data, sizes);
    }
    Py_BEGIN_ALLOW_THREADS
    self->fn(packed);
    Py_END_ALLOW_THREADS
    PyObject *wrapped[MAX_RESULTS];
    for (Py_ssize_t j = 0; j < n_out; j++) {
        PyObject *argv[2] = {outs[j], self->device};
        wrapped[j] = PyObject_Vectorcall(self->wrap, argv, 2, NULL);
        Py_DECREF(outs[j]);
        if (wrapped[j] == NULL) {
            for (Py_ssize_t k = 0; k < j; k++)
                Py_DECREF(wrapped[k]);
            for (Py_ssize_t k = j + 1; k < n_out; k++)
                Py_DECREF(outs[k]);
            return NULL;
        }
    }
    if (n_out == 0)  /* destination passing: the caller's arrays were written */
        Py_RETURN_NONE;
    if (n_out == 1)
        return wrapped[0];
    PyObject *tuple = PyTuple_New(n_out);
    if (tuple == NULL) {
        for (Py_ssize_t k = 0; k < n_out; k++)
            Py_DECREF(wrapped[k]);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n_out; k++)
        PyTuple_SET_ITEM(tuple, k, wrapped[k]);
    return tuple;
}

static PyObject *fast_call(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kw) {
    FastEntry *self = (FastEntry *)obj;
    if (self->fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "FastEntry: called after it was cleared");
        return NULL;
    }
    if (kw != NULL || PyVectorcall_NARGS(nargsf) != self->n_params)
        return call_fallback(self, args, nargsf, kw);
    int64_t stack_words[MAX_STACK_WORDS];
    void *stack_ptrs[2 * MAX_STACK_ARGS];
    Py_ssize_t n_all = self->n_params + self->n_results;
    int64_t *words = stack_words;
    void **ptrs = stack_ptrs;
    if (self->words > MAX_STACK_WORDS)
        words = PyMem_Malloc((size_t)self->words * sizeof(int64_t));
    if (n_all > MAX_STACK_ARGS)
        ptrs = PyMem_Malloc((size_t)(2 * n_all) * sizeof(void *));
    PyObject *result = NULL;
    if (words == NULL || ptrs == NULL)
        PyErr_NoMemory();
    else
        result = call_with(self, args, nargsf, kw, words, ptrs);
    if (words != stack_words)
        PyMem_Free(words);
    if (ptrs != stack_ptrs)
        PyMem_Free(ptrs);
    return result;
}

static int read_slot(Slot *slot, PyObject *spec, int n_symbols) {
    /* (dtype, plan tuple, site) */
    PyObject *dtype, *plan, *site;
    if (!PyArg_ParseTuple(spec, "OOO", &dtype, &plan, &site))
        return -1;
    if (!PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) > MAX_RANK) {
        PyErr_SetString(PyExc_ValueError, "a slot's plan must be a tuple of at most 16 ints");
        return -1;
    }
    slot->rank = (int)PyTuple_GET_SIZE(plan);
    for (int d = 0; d < slot->rank; d++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(plan, d));
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (v < -(long long)n_symbols) {
            PyErr_SetString(PyExc_ValueError, "a slot's plan names an unknown symbol");
            return -1;
        }
        slot->plan[d] = v;
    }
    PyObject *itemsize = PyObject_GetAttrString(dtype, "itemsize");
    if (itemsize == NULL)
        return -1;
    slot->itemsize = PyLong_AsSsize_t(itemsize);
    Py_DECREF(itemsize);
    if (slot->itemsize == -1 && PyErr_Occurred())
        return -1;
    Py_INCREF(dtype);
    slot->dtype = dtype;
    Py_INCREF(site);
    slot->site = site;
    return 0;
}

static int fast_traverse(PyObject *obj, visitproc visit, void *arg) {
    FastEntry *self = (FastEntry *)obj;
    Py_VISIT(self->ndarray);
    Py_VISIT(self->empty);
    Py_VISIT(self->large);
    Py_VISIT(self->wrap);
    Py_VISIT(self->device);
    Py_VISIT(self->fallback);  /* the EntryPoint's bound method: a cycle through it */
    return 0;
}

static int fast_clear(PyObject *obj) {
    FastEntry *self = (FastEntry *)obj;
    Py_CLEAR(self->ndarray);
    Py_CLEAR(self->empty);
    Py_CLEAR(self->large);
    Py_CLEAR(self->wrap);
    Py_CLEAR(self->device);
    Py_CLEAR(self->fallback);
    return 0;
}

static void fast_dealloc(PyObject *obj) {
    FastEntry *self = (FastEntry *)obj;
    PyObject_GC_UnTrack(obj);
    if (self->slots != NULL) {
        for (Py_ssize_t i = 0; i < self->n_params + self->n_results; i++) {
            Py_XDECREF(self->slots[i].dtype);
            Py_XDECREF(self->slots[i].site);
        }
        PyMem_Free(self->slots);
    }
    fast_clear(obj);
    Py_TYPE(obj)->tp_free(obj);
}

static PyObject *fast_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *fn, *params, *results, *ndarray, *empty, *large, *wrap, *device, *fallback;
    Py_ssize_t large_bytes;
    int n_symbols;
    if (!PyArg_ParseTuple(args, "OO!O!iOOOnOOO", &fn, &PyList_Type, &params, &PyList_Type,
                          &results, &n_symbols, &ndarray, &empty, &large, &large_bytes, &wrap,
                          &device, &fallback))
        return NULL;
    Py_ssize_t n_params = PyList_GET_SIZE(params), n_results = PyList_GET_SIZE(results);
    if (n_symbols < 0 || n_symbols > MAX_SYMBOLS || n_results > MAX_RESULTS) {
        PyErr_SetString(PyExc_ValueError, "FastEntry: too many symbols or results");
        return NULL;
    }
    FastEntry *self = (FastEntry *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = fast_call;
    self->fn = (void (*)(void **))PyLong_AsVoidPtr(fn);
    self->n_params = n_params;
    self->n_results = n_results;
    self->large_bytes = large_bytes;
    self->slots = PyMem_Calloc((size_t)(n_params + n_results), sizeof(Slot));
    Py_INCREF(ndarray); self->ndarray = ndarray;
    Py_INCREF(empty); self->empty = empty;
    Py_INCREF(large); self->large = large;
    Py_INCREF(wrap); self->wrap = wrap;
    Py_INCREF(device); self->device = device;
    Py_INCREF(fallback); self->fallback = fallback;
    if (PyErr_Occurred() || self->slots == NULL || self->fn == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "FastEntry: null function or no memory");
        Py_DECREF(self);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n_params + n_results; i++) {
        PyObject *spec = i < n_params ? PyList_GET_ITEM(params, i)
                                      : PyList_GET_ITEM(results, i - n_params);
        if (read_slot(&self->slots[i], spec, n_symbols) < 0) {
            Py_DECREF(self);
            return NULL;
        }
        self->slots[i].words = self->words;
        self->words += 3 + 2 * self->slots[i].rank;  /* allocated, aligned, offset, sizes, strides */
    }
    return (PyObject *)self;
}

static PyObject *fast_vectorcall_entry(PyObject *obj, PyObject *args, PyObject *kwargs) {
    return PyVectorcall_Call(obj, args, kwargs);
}

static PyTypeObject FastEntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "relaxmlir.runtime.native._entry.FastEntry",
    .tp_basicsize = sizeof(FastEntry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = fast_traverse,
    .tp_clear = fast_clear,
    .tp_vectorcall_offset = offsetof(FastEntry, vectorcall),
    .tp_call = fast_vectorcall_entry,
    .tp_new = fast_new,
    .tp_dealloc = fast_dealloc,
    .tp_doc = "FastEntry(fn, params, results, n_symbols, ndarray, empty, large, "
              "large_bytes, wrap, device, fallback): one entry point's call for plain arrays.",
};

static PyObject *array_fields(PyObject *module, PyObject *args) {
    /* (data, nd, dims, descr id, flags) as this module reads them: entry.py compares them with
     * numpy's own view of a probe array before it trusts the layout. */
    PyObject *ndarray, *a;
    if (!PyArg_ParseTuple(args, "OO", &ndarray, &a))
        return NULL;
    if (!PyType_Check(ndarray) || Py_TYPE(a) != (PyTypeObject *)ndarray) {
        PyErr_SetString(PyExc_TypeError, "array_fields(ndarray, a): a must be an ndarray");
        return NULL;
    }
    ArrayFields *f = (ArrayFields *)a;
    PyObject *dims = PyTuple_New(f->nd);
    if (dims == NULL)
        return NULL;
    for (int d = 0; d < f->nd; d++)
        PyTuple_SET_ITEM(dims, d, PyLong_FromSsize_t(f->dimensions[d]));
    return Py_BuildValue("(NiNNi)", PyLong_FromVoidPtr(f->data), f->nd, dims,
                         PyLong_FromVoidPtr(f->descr), f->flags & ARRAY_C_CONTIGUOUS);
}

static PyMethodDef methods[] = {
    {"array_fields", array_fields, METH_VARARGS, "The fields of an ndarray as FastEntry reads them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_entry", "Entry-point calls in C (runtime/entry.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__entry(void) {
    str_device = PyUnicode_InternFromString("device");
    str_array = PyUnicode_InternFromString("_array");
    if (str_device == NULL || str_array == NULL || PyType_Ready(&FastEntryType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Py_INCREF(&FastEntryType);
    if (PyModule_AddObject(m, "FastEntry", (PyObject *)&FastEntryType) < 0) {
        Py_DECREF(&FastEntryType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
