/*
 * What the two compiled codecs share (runtime/_wirecodec.c for protobuf messages,
 * runtime/_framecodec.c for frame structs): the growable output buffer, slot access by member
 * offset, the checks that a class still holds its fields in the slots a codec found, the
 * fallback of the compiled constructors, and the binding that makes a codec an `encode` method.
 * Each file includes it once; the functions are static, so each module has its own copy.
 */
#ifndef PROTOFRAME_CODEC_COMMON_H
#define PROTOFRAME_CODEC_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* output buffer */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    char inline_data[512];
} Out;

static inline void out_init(Out *o) {
    o->data = o->inline_data;
    o->len = 0;
    o->cap = sizeof o->inline_data;
}

static inline void out_free(Out *o) {
    if (o->data != o->inline_data) PyMem_Free(o->data);
}

/* Room for `extra` more bytes; -1 with MemoryError set if there is none. */
static inline int out_reserve(Out *o, Py_ssize_t extra) {
    if (o->len + extra <= o->cap) return 0;
    Py_ssize_t cap = o->cap * 2;
    while (cap < o->len + extra) cap *= 2;
    char *p;
    if (o->data == o->inline_data) {
        p = PyMem_Malloc(cap);
        if (p) memcpy(p, o->data, o->len);
    } else {
        p = PyMem_Realloc(o->data, cap);
    }
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    o->data = p;
    o->cap = cap;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* slots */

static inline PyObject *slot(PyObject *obj, Py_ssize_t offset) {
    return *(PyObject **)((char *)obj + offset);
}

/* The offset of cls's own object slot `name`; -1 with TypeError if it has no such slot. */
static inline Py_ssize_t member_offset(PyTypeObject *cls, PyObject *name) {
    PyObject *descr = PyDict_GetItemWithError(cls->tp_dict, name);
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%s.%U is not a slot", cls->tp_name, name);
        return -1;
    }
    PyMemberDef *def = ((PyMemberDescrObject *)descr)->d_member;
    if (def->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%U is not an object slot", cls->tp_name, name);
        return -1;
    }
    return def->offset;
}

/* Whether `name` on cls is still the object slot at `offset`. */
static inline int slot_intact(PyTypeObject *cls, PyObject *name, Py_ssize_t offset) {
    PyObject *descr = _PyType_Lookup(cls, name);  /* borrowed; never sets an error */
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) return 0;
    PyMemberDef *def = ((PyMemberDescrObject *)descr)->d_member;
    return def->type == T_OBJECT_EX && def->offset == offset;
}

/* ------------------------------------------------------------------------------------------ */
/* the compiled constructors' way out, and the codecs' method binding */

/* cls(*args, **kwargs) as without a compiled constructor: type.__call__ runs __new__ and the
   Python __init__, with the recursion check CPython makes around any tp_call. */
static inline PyObject *ctor_fallback(PyObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames) {
    PyObject *tuple = PyTuple_New(nargs), *kwargs = NULL, *result = NULL;
    if (tuple == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw) {
        if ((kwargs = PyDict_New()) == NULL) goto done;
        for (Py_ssize_t j = 0; j < nkw; j++)
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, j), args[nargs + j]) < 0)
                goto done;
    }
    if (Py_EnterRecursiveCall(" while calling a Python object") == 0) {
        result = PyType_Type.tp_call(cls, tuple, kwargs);
        Py_LeaveRecursiveCall();
    }
done:
    Py_DECREF(tuple);
    Py_XDECREF(kwargs);
    return result;
}

/* As a class attribute a codec is the `encode` method: its type is flagged as a method
   descriptor, so `value.encode()` calls it with the value and no bound method is made. */
static inline PyObject *method_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

#endif
