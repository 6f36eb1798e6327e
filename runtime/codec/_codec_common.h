/*
 * What the compiled codecs share (runtime/codec/_wirecodec.c for protobuf messages,
 * runtime/codec/_framecodec.c for frame structs, runtime/codec/_columnar.c for Arrow columns,
 * which takes only the vocabulary's export): the growable output buffer, slot access by member
 * offset, the checks that a class still holds its fields in the slots a codec found, the
 * fallback of the compiled constructors, and the binding that makes a codec an `encode` method.
 * Each file includes it once; the functions are static inline, so each module has its own copy
 * of those it uses and no warning for those it does not.
 */
#ifndef PROTOFRAME_CODEC_COMMON_H
#define PROTOFRAME_CODEC_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "_vocabulary.h"

/* ------------------------------------------------------------------------------------------ */
/* the layout tables' vocabulary */

/* Export the numbering this module was compiled with as module.VOCABULARY (vocabulary ->
   name -> number), which runtime.codec.vocabulary.check_built compares with its own at
   import. 0, or -1 with an exception set. */
static inline int add_vocabulary(PyObject *module) {
    PyObject *all = PyDict_New();
    if (all == NULL) return -1;
    for (const VocabularyWord *w = VOCABULARY_WORDS; w->vocabulary != NULL; w++) {
        PyObject *words = PyDict_GetItemString(all, w->vocabulary);  /* borrowed */
        if (words == NULL) {
            if ((words = PyDict_New()) == NULL) goto fail;
            int put = PyDict_SetItemString(all, w->vocabulary, words);
            Py_DECREF(words);
            if (put < 0) goto fail;
        }
        PyObject *number = PyLong_FromLong(w->number);
        if (number == NULL) goto fail;
        int put = PyDict_SetItemString(words, w->name, number);
        Py_DECREF(number);
        if (put < 0) goto fail;
    }
    if (PyModule_AddObjectRef(module, "VOCABULARY", all) < 0) goto fail;
    Py_DECREF(all);
    return 0;
fail:
    Py_DECREF(all);
    return -1;
}

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
#if PY_VERSION_HEX >= 0x030C0000
    /* From 3.12 a static builtin type (int, say) keeps its dict per interpreter: tp_dict is
       NULL there, so it is asked for. */
    PyObject *dict = PyType_GetDict(cls);
#else
    PyObject *dict = cls->tp_dict;
    Py_XINCREF(dict);
#endif
    PyObject *descr = dict != NULL ? PyDict_GetItemWithError(dict, name) : NULL;
    Py_ssize_t offset = -1;
    int type = -1;
    if (descr != NULL && Py_TYPE(descr) == &PyMemberDescr_Type) {
        PyMemberDef *def = ((PyMemberDescrObject *)descr)->d_member;
        offset = def->offset;
        type = def->type;
    }
    Py_XDECREF(dict);
    if (offset < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%s.%U is not a slot", cls->tp_name, name);
        return -1;
    }
    if (type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%U is not an object slot", cls->tp_name, name);
        return -1;
    }
    return offset;
}

/* Whether `name` on cls is still the object slot at `offset`. */
static inline int slot_intact(PyTypeObject *cls, PyObject *name, Py_ssize_t offset) {
    PyObject *descr = _PyType_Lookup(cls, name);  /* borrowed; never sets an error */
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) return 0;
    PyMemberDef *def = ((PyMemberDescrObject *)descr)->d_member;
    return def->type == T_OBJECT_EX && def->offset == offset;
}

/* cls's version tag, or 0 if it has none that is valid. Assigning a class attribute (anything
   that calls PyType_Modified) zeroes the tag, and the next one given is a number never used
   before. Up to 3.12 a valid tag is also flagged Py_TPFLAGS_VALID_VERSION_TAG; 3.13 no longer
   sets that flag, and a tag of 0 is the only sign of none. */
static inline unsigned int valid_version_tag(PyTypeObject *cls) {
#if PY_VERSION_HEX >= 0x030D0000
    return cls->tp_version_tag;
#else
    return PyType_HasFeature(cls, Py_TPFLAGS_VALID_VERSION_TAG) ? cls->tp_version_tag : 0;
#endif
}

/* What runtime.codec._wirecodec lends runtime.codec._framecodec, through a capsule, so that a
   frame's protobuf parts are written straight into the frame's buffer. */
#define WIRECODEC_CAPSULE "protoframe.runtime.codec._wirecodec._C_API"

typedef struct {
    /* Append obj's protobuf encoding to o, if its class's `encode` is still the compiled
       codec. 0 when done; -1 to give up, leaving o->len to the caller to roll back (an error
       is set only when memory ran out). */
    int (*encode_into)(PyObject *obj, Out *o);
    /* cls.decode_from(buf, pos, end) for data = buf's bytes, if cls's `decode_from` is still
       the compiled codec's, without the call, the position ints and the attribute lookup.
       NULL to give up, with an error set only when memory ran out: the caller then calls
       the method, which decodes or raises as it would have. */
    PyObject *(*decode_from)(PyObject *cls, const unsigned char *data, Py_ssize_t pos,
                             Py_ssize_t end);
} WireCodecAPI;

/* ------------------------------------------------------------------------------------------ */
/* integers */

/* v (an int) as an unsigned 64-bit value; 0 if it is negative or does not fit, with no error
   set. The signed conversion comes first because CPython does it digit by digit, while the
   unsigned one goes through a byte array for anything above 2**30. */
static inline int as_u64(PyObject *v, unsigned long long *out) {
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow == 0) {
        if (x < 0) {
            PyErr_Clear();  /* -1 may mean an error (not an int) */
            return 0;
        }
        *out = (unsigned long long)x;
        return 1;
    }
    if (overflow < 0) return 0;
    unsigned long long u = PyLong_AsUnsignedLongLong(v);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = u;
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* class -> codec */

/* An open-addressing table keyed by the class's address. The constructors and the in-place
   encode look a codec up on every call, and a dict lookup with a type key (hash, generic
   compare) costs several times more. It holds a reference to each class and codec; entries
   are replaced, never removed. */
typedef struct {
    PyObject *cls;
    PyObject *codec;
} TypeEntry;

typedef struct {
    TypeEntry *entries;
    size_t mask;  /* capacity - 1; the capacity is a power of two */
    size_t used;
} TypeTable;

static inline size_t type_table_hash(const PyObject *cls) {
    uintptr_t x = (uintptr_t)cls;
    return (size_t)(x >> 4 ^ x >> 13);
}

/* The codec for cls (borrowed), or NULL. */
static inline PyObject *type_table_get(const TypeTable *t, const PyObject *cls) {
    if (t->entries == NULL) return NULL;
    for (size_t h = type_table_hash(cls) & t->mask;; h = (h + 1) & t->mask) {
        if (t->entries[h].cls == cls) return t->entries[h].codec;
        if (t->entries[h].cls == NULL) return NULL;
    }
}

static inline int type_table_put(TypeTable *t, PyObject *cls, PyObject *codec) {
    if (t->entries == NULL || (t->used + 1) * 2 > t->mask + 1) {
        size_t cap = t->entries == NULL ? 64 : (t->mask + 1) * 2;
        TypeEntry *grown = PyMem_Calloc(cap, sizeof(TypeEntry));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; t->entries != NULL && i <= t->mask; i++) {
            if (t->entries[i].cls == NULL) continue;
            size_t h = type_table_hash(t->entries[i].cls) & (cap - 1);
            while (grown[h].cls != NULL) h = (h + 1) & (cap - 1);
            grown[h] = t->entries[i];
        }
        PyMem_Free(t->entries);
        t->entries = grown;
        t->mask = cap - 1;
    }
    size_t h = type_table_hash(cls) & t->mask;
    while (t->entries[h].cls != NULL && t->entries[h].cls != cls) h = (h + 1) & t->mask;
    if (t->entries[h].cls == cls) {
        Py_SETREF(t->entries[h].codec, Py_NewRef(codec));
    } else {
        t->entries[h].cls = Py_NewRef(cls);
        t->entries[h].codec = Py_NewRef(codec);
        t->used++;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* deallocation */

/* tp_dealloc for a class with a compiled constructor: what CPython's subtype_dealloc does for a
   class whose base is object and which has no __dict__ or __weakref__ (every generated message
   and frame struct), without the checks for what such a class cannot have. A subclass keeps
   subtype_dealloc, which clears its own slots, dict and weak references and then calls this
   for the slots of the class below it. */
/* Whether a class adds nothing to its instances' memory: object itself, or a class statement
   with `__slots__ = ()` directly on object, such as runtime.codec.protowire.Message, the base
   of the generated message classes. The slots slotted_dealloc clears are those of the class
   just above such a base. */
static inline int adds_no_storage(PyTypeObject *t) {
    return t == &PyBaseObject_Type
        || (t->tp_base == &PyBaseObject_Type && PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE)
            && t->tp_basicsize == PyBaseObject_Type.tp_basicsize && t->tp_itemsize == 0
            && t->tp_dictoffset == 0 && t->tp_weaklistoffset == 0
            && !PyType_HasFeature(t, Py_TPFLAGS_MANAGED_DICT) && t->tp_del == NULL);
}

static inline void slotted_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_TRASHCAN_BEGIN(self, slotted_dealloc)
    if (type->tp_finalize != NULL) {
        /* A __del__ added to the class: it runs once (a subclass's ran already), and may
           resurrect the object. */
        PyObject_GC_Track(self);
        if (PyObject_CallFinalizerFromDealloc(self) < 0) goto end;
        PyObject_GC_UnTrack(self);
    }
    /* The slots to clear are those of the class it was installed on (a subclass's own were
       cleared before): the class just above object, or above a storage-less base. */
    PyTypeObject *base = type;
    /* Called as the type's own tp_dealloc, it is the class it was installed on (a subclass
       has subtype_dealloc): no walk, which would test a storage-less base on every free. */
    if (type->tp_dealloc != slotted_dealloc)
        while (base->tp_base != NULL && !adds_no_storage(base->tp_base)) base = base->tp_base;
    /* A class statement's tp_members are its __slots__, ended by an empty entry. */
    for (PyMemberDef *mp = base->tp_members; mp != NULL && mp->name != NULL; mp++) {
        if (mp->type != T_OBJECT_EX || (mp->flags & READONLY)) continue;
        PyObject **addr = (PyObject **)((char *)self + mp->offset);
        PyObject *obj = *addr;
        if (obj != NULL) {
            *addr = NULL;
            Py_DECREF(obj);
        }
    }
    type->tp_free(self);
    Py_DECREF(type);  /* a heap type's instances hold a reference to it */
end:
    Py_TRASHCAN_END
}

/* Put slotted_dealloc on cls if it can stand in there; *saved gets the tp_dealloc it had. */
static inline void install_slotted_dealloc(PyTypeObject *cls, destructor *saved) {
    if (cls->tp_dealloc == slotted_dealloc) return;  /* installed before */
    if (adds_no_storage(cls->tp_base) && cls->tp_dictoffset == 0
            && cls->tp_weaklistoffset == 0 && cls->tp_itemsize == 0
            && !PyType_HasFeature(cls, Py_TPFLAGS_MANAGED_DICT)
            && PyType_HasFeature(cls, Py_TPFLAGS_HEAPTYPE) && PyType_IS_GC(cls)
            && cls->tp_del == NULL) {
        *saved = cls->tp_dealloc;
        cls->tp_dealloc = slotted_dealloc;
    }
}

/* Switch between slotted_dealloc and the tp_dealloc it replaced (NULL: none was). Objects
   made under either are freed right by both. */
static inline void enable_slotted_dealloc(PyTypeObject *cls, destructor saved, int on) {
    if (saved != NULL) cls->tp_dealloc = on ? slotted_dealloc : saved;
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
