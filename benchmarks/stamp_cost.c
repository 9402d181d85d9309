/* An experiment, not part of the package: the arrival stamp of src/openai_latency/websocket/arrivals.py
 * (install) written as a C callable, to measure what a compiled stamp would save per event.
 * benchmarks/stamp_cost.py builds it with the running interpreter's headers and times it.
 *
 * Stamp(append, original, TEXT, BINARY, CONT)(frame): as the Python stamp, appends (CLOCK_MONOTONIC ns,
 * size) for the last frame of a data message (the size of all its frames), then calls original(frame).
 * The frame's fields are read from its __dict__ (a dataclass): no descriptor lookups. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <time.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *append, *original, *text, *binary, *cont;
    Py_ssize_t partial;
} Stamp;

static PyObject *s_opcode, *s_fin, *s_data;

static void record(Stamp *s, PyObject *frame) {
    PyObject *fields = PyObject_GenericGetDict(frame, NULL);
    if (fields == NULL) { PyErr_Clear(); return; }
    PyObject *opcode = PyDict_GetItemWithError(fields, s_opcode);  /* borrowed */
    int cont = opcode != NULL && opcode == s->cont;
    if (opcode == NULL || !(opcode == s->text || opcode == s->binary || cont)) {
        Py_DECREF(fields); PyErr_Clear(); return;
    }
    PyObject *fin = PyDict_GetItemWithError(fields, s_fin), *data = PyDict_GetItemWithError(fields, s_data);
    Py_ssize_t size = data == NULL ? -1 : PyObject_Length(data);
    int last = fin == NULL ? -1 : PyObject_IsTrue(fin);
    Py_DECREF(fields);
    if (size < 0 || last < 0) { PyErr_Clear(); return; }
    if (cont) size += s->partial;
    if (!last) { s->partial = size; return; }
    s->partial = 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    PyObject *stamp = PyTuple_New(2);
    if (stamp == NULL) { PyErr_Clear(); return; }
    PyTuple_SET_ITEM(stamp, 0, PyLong_FromLongLong((long long)now.tv_sec * 1000000000LL + now.tv_nsec));
    PyTuple_SET_ITEM(stamp, 1, PyLong_FromSsize_t(size));
    PyObject *done = PyObject_CallOneArg(s->append, stamp);
    Py_DECREF(stamp);
    if (done == NULL) PyErr_Clear(); else Py_DECREF(done);
}

static PyObject *call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Stamp *s = (Stamp *)self;
    if (PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL) record(s, args[0]);
    return PyObject_Vectorcall(s->original, args, nargsf, kwnames);
}

static int init(Stamp *s, PyObject *args, PyObject *kwargs) {
    if (!PyArg_ParseTuple(args, "OOOOO", &s->append, &s->original, &s->text, &s->binary, &s->cont)) return -1;
    Py_INCREF(s->append); Py_INCREF(s->original); Py_INCREF(s->text); Py_INCREF(s->binary); Py_INCREF(s->cont);
    s->vectorcall = call;
    s->partial = 0;
    return 0;
}

static void dealloc(Stamp *s) {
    Py_XDECREF(s->append); Py_XDECREF(s->original); Py_XDECREF(s->text); Py_XDECREF(s->binary); Py_XDECREF(s->cont);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyTypeObject StampType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stamp_cost.Stamp",
    .tp_basicsize = sizeof(Stamp),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Stamp, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)init,
    .tp_dealloc = (destructor)dealloc,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "stamp_cost_c", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_stamp_cost_c(void) {
    if (PyType_Ready(&StampType) < 0) return NULL;
    s_opcode = PyUnicode_InternFromString("opcode");
    s_fin = PyUnicode_InternFromString("fin");
    s_data = PyUnicode_InternFromString("data");
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&StampType);
    if (PyModule_AddObject(m, "Stamp", (PyObject *)&StampType) < 0) return NULL;
    return m;
}
