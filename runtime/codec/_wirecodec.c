/*
 * Compiled protobuf codec for generated messages, driven by the per-message layout tables the
 * generator emits (see runtime/codec/compiled.py for how a table is installed on its class).
 *
 * It is a fast path, not a second implementation of the rules. It encodes and decodes what
 * is well formed and uses plain types; on anything else (a truncated buffer, a bad varint,
 * invalid UTF-8, a missing required field, an out-of-range or unusual value, a group) it gives
 * up without side effects and the generated Python codec handles the whole message. So every
 * error, and every corner of the semantics, is the Python codec's, which stays the reference.
 *
 * Give-up is signalled by returning -1 (or NULL) with no Python exception set; a set exception
 * (only MemoryError in practice) propagates.
 *
 * Slots are read and written through the offsets of the classes' member descriptors, as
 * CPython's own slot descriptors do.
 *
 * The same tables also give each class a compiled constructor (see "the compiled constructor"
 * below): cls(**kwargs) fills the slots the way the generated __init__ would, and leaves
 * anything unusual to type.__call__ and that __init__.
 */
#include "_codec_common.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Field kinds (K_*) and how a field is held (M_*): _vocabulary.h, from vocabulary.py. */

#define MAX_DEPTH 64
/* Freed instances a class keeps: enough for the messages of a frame or two. */
#define POOL_MAX 16

typedef struct CodecObject CodecObject;

typedef struct {
    uint32_t number;
    int kind;
    int mode;
    int wire;
    Py_ssize_t offset;   /* slot offset; -1 for sparse fields */
    PyObject *key;       /* sparse key (str) */
    PyObject *storage;   /* slot name, or the sparse key */
    PyObject *keyword;   /* the __init__ keyword (borrowed from the codec's keywords) */
    PyObject *extra;     /* message class, or the number -> member dict of an enum */
    CodecObject *sub;    /* codec of a message field's class, resolved on first use */
    PyObject *dflt;      /* an implicit field's default; a map's value default (NULL for
                            message values, which are decoded from no bytes) */
    PyObject *key_dflt;  /* a map's key default */
    int key_kind;        /* a map's key kind */
    Py_ssize_t oneof;    /* a oneof member's oneof index in its message */
    int none_fails;      /* a None value makes the Python encoder raise: required, a map, a
                            float's implicit value (known once, not tested per None) */
    PyObject **members;  /* an enum's: members[n] is the member numbered n (borrowed from
                            extra; NULL where none is), for n below nmembers */
    Py_ssize_t nmembers;
} FieldInfo;

struct CodecObject {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *cls;
    Py_ssize_t nfields;
    FieldInfo *fields;        /* in field-number order */
    Py_ssize_t unknown_offset;
    Py_ssize_t present_offset; /* -1 without sparse fields */
    PyObject *sparse_index;   /* key -> index into fields */
    int32_t *by_tag;          /* tag -> index + 1, negative for a packed repeated field */
    Py_ssize_t *slotted;      /* indexes of the fields with a slot of their own */
    Py_ssize_t nslotted;
    Py_ssize_t *slot_offset;  /* per slotted field: its offset, and */
    char *slot_repeated;      /* how the constructor fills it: one of the INIT_* below */
    Py_ssize_t nrequired;     /* how many fields are required, and */
    Py_ssize_t *required;     /* their indexes */
    uint32_t tag_limit;
    PyObject *py_encode;      /* the generated Python methods, for whatever this gives up on */
    PyObject *py_decode_from;
    PyObject *present_name;   /* name of the present-fields slot, or NULL */
    /* The compiled constructor; keywords is NULL until install_constructor prepares it. */
    PyObject *keywords;       /* tuple: each field's __init__ keyword, in field order */
    PyObject *keyword_index;  /* keyword -> index into fields */
    PyObject *py_init;        /* the generated __init__ the constructor stands in for */
    vectorcallfunc saved_vectorcall;  /* cls->tp_vectorcall before the constructor went in */
    destructor saved_dealloc;  /* cls->tp_dealloc before slotted_dealloc or pooled_dealloc,
                                  or NULL */
    unsigned int ctor_version;  /* cls's version tag when last found intact; 0: check again */
    int ctor_on;
    /* Freed instances kept for the next decode or construction (see "the instance pool"):
       pool_ok when cls's instances can be kept, their memory being their slots only. */
    int pool_ok;
    int pooled_here;  /* pooled_dealloc is the one enable_constructor switches */
    /* The offsets of cls's object slots (its tp_members, which a heap type never changes),
       gathered once for pooled_dealloc; NULL: it walks tp_members itself. */
    Py_ssize_t *member_offsets;
    Py_ssize_t nmember_offsets;
    Py_ssize_t nfree;
    PyObject *free_objs[POOL_MAX];
};

static PyTypeObject Codec_Type;
static TypeTable codecs;    /* class -> codec */
static PyObject *empty_bytes;  /* b"" */

static const int wire_of_kind[K_KIND_END] = {
    [K_INT32] = 0, [K_INT64] = 0, [K_UINT32] = 0, [K_UINT64] = 0, [K_SINT32] = 0,
    [K_SINT64] = 0, [K_BOOL] = 0, [K_ENUM] = 0, [K_OPEN_ENUM] = 0, [K_FIXED32] = 5,
    [K_SFIXED32] = 5, [K_FLOAT] = 5, [K_FIXED64] = 1, [K_SFIXED64] = 1, [K_DOUBLE] = 1,
    [K_STRING] = 2, [K_BYTES] = 2, [K_MESSAGE] = 2,
};

static inline int put_varint(Out *o, uint64_t v) {
    if (out_reserve(o, 10) < 0) return -1;
    char *p = o->data + o->len;
    while (v >= 0x80) { *p++ = (char)(v | 0x80); v >>= 7; }
    *p++ = (char)v;
    o->len = p - o->data;
    return 0;
}

static inline int put_bytes(Out *o, const char *src, Py_ssize_t n) {
    if (out_reserve(o, n) < 0) return -1;
    memcpy(o->data + o->len, src, n);
    o->len += n;
    return 0;
}

static int varint_size(uint64_t v) { int n = 1; while (v >= 0x80) { v >>= 7; n++; } return n; }

/* Write the length of what was written since `mark` (where one byte was reserved) in front of
   it, moving it along when the prefix needs more than one byte. */
static int close_len(Out *o, Py_ssize_t mark) {
    uint64_t size = (uint64_t)(o->len - mark - 1);
    int n = varint_size(size);
    if (n > 1) {
        if (out_reserve(o, n - 1) < 0) return -1;
        memmove(o->data + mark + n, o->data + mark + 1, (size_t)size);
        o->len += n - 1;
    }
    char *p = o->data + mark;
    while (size >= 0x80) { *p++ = (char)(size | 0x80); size >>= 7; }
    *p = (char)size;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* the instance pool
 *
 * A decode makes one instance per message (a SEND command is two, BaseCommand and
 * CommandSend), and the caller mostly drops them before the next decode. Allocating a GC
 * object and freeing it again was a tenth of a small command's decode+read, so a class with a
 * codec keeps up to POOL_MAX of its freed instances, their slots already cleared, and the
 * decoder and the compiled constructor take one from there before asking tp_alloc. An
 * instance taken from the pool is in the state a fresh one is in (every slot NULL, untracked,
 * no finalizer run), so nothing of the message it was shows: the caller fills every slot as
 * for a fresh instance.
 *
 * It is done by the class's tp_dealloc (pooled_dealloc, which frees as slotted_dealloc does),
 * only for classes whose instances are their slots and nothing else, and only for instances
 * of exactly the class: a subclass's, and any instance while the class has a finalizer, are
 * freed as before. */

static void pooled_dealloc(PyObject *self);

/* Whether cls's instances can go into its pool: object's allocation and freeing, no dict, no
   weak references, no finalizer, and every byte after the object header one of its own
   object slots (which pooled_dealloc clears). */
static int poolable(PyTypeObject *cls) {
    if (!adds_no_storage(cls->tp_base) || cls->tp_dictoffset != 0
            || cls->tp_weaklistoffset != 0 || cls->tp_itemsize != 0
            || PyType_HasFeature(cls, Py_TPFLAGS_MANAGED_DICT)
            || !PyType_HasFeature(cls, Py_TPFLAGS_HEAPTYPE) || !PyType_IS_GC(cls)
            || cls->tp_del != NULL || cls->tp_finalize != NULL
            || cls->tp_alloc != PyType_GenericAlloc || cls->tp_free != PyObject_GC_Del)
        return 0;
    Py_ssize_t covered = 0;
    for (PyMemberDef *mp = cls->tp_members; mp != NULL && mp->name != NULL; mp++) {
        if (mp->type != T_OBJECT_EX || (mp->flags & READONLY)) return 0;
        covered += (Py_ssize_t)sizeof(PyObject *);
    }
    return cls->tp_basicsize == PyBaseObject_Type.tp_basicsize + covered;
}

/* slotted_dealloc, but an instance of exactly a pooled class goes into its codec's pool
   (while there is room) instead of back to the allocator. */
static void pooled_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_TRASHCAN_BEGIN(self, pooled_dealloc)
    if (type->tp_finalize != NULL) {
        /* A __del__ added to the class: it runs once (a subclass's ran already), and may
           resurrect the object. */
        PyObject_GC_Track(self);
        if (PyObject_CallFinalizerFromDealloc(self) < 0) goto end;
        PyObject_GC_UnTrack(self);
    }
    /* Called as the type's own tp_dealloc, it is the class it was installed on; from a
       subclass's subtype_dealloc, the slots to clear are those of the class above object. */
    PyTypeObject *base = type;
    int own = type->tp_dealloc == pooled_dealloc;
    CodecObject *codec = own ? (CodecObject *)type_table_get(&codecs, (PyObject *)type) : NULL;
    if (codec != NULL && codec->cls == type && codec->member_offsets != NULL) {
        /* The same slots as the walk below, their offsets gathered from type's tp_members. */
        const Py_ssize_t *offsets = codec->member_offsets;
        for (Py_ssize_t k = 0, n = codec->nmember_offsets; k < n; k++) {
            PyObject **addr = (PyObject **)((char *)self + offsets[k]);
            PyObject *obj = *addr;
            if (obj != NULL) {
                *addr = NULL;
                Py_DECREF(obj);
            }
        }
    } else {
        if (!own)
            while (base->tp_base != NULL && !adds_no_storage(base->tp_base))
                base = base->tp_base;
        for (PyMemberDef *mp = base->tp_members; mp != NULL && mp->name != NULL; mp++) {
            if (mp->type != T_OBJECT_EX || (mp->flags & READONLY)) continue;
            PyObject **addr = (PyObject **)((char *)self + mp->offset);
            PyObject *obj = *addr;
            if (obj != NULL) {
                *addr = NULL;
                Py_DECREF(obj);
            }
        }
    }
    /* Finalized once (a __del__ since removed) it would not be finalized again if one came
       back: such an instance is not handed out again. */
    if (codec != NULL && codec->pool_ok && codec->nfree < POOL_MAX
            && type->tp_finalize == NULL && !PyObject_GC_IsFinalized(self))
        codec->free_objs[codec->nfree++] = self;
    else
        type->tp_free(self);
    Py_DECREF(type);  /* a heap type's instances hold a reference to it */
end:
    Py_TRASHCAN_END
}

/* A new instance of codec's class with every slot NULL, as tp_alloc gives it: from the pool
   when it has one. */
static inline PyObject *new_instance(CodecObject *codec) {
    PyTypeObject *cls = codec->cls;
    if (codec->nfree > 0 && cls->tp_alloc == PyType_GenericAlloc) {
        PyObject *obj = codec->free_objs[--codec->nfree];
        Py_INCREF(cls);
#if PY_VERSION_HEX < 0x030D0000
        _Py_NewReference(obj);
#else
        Py_SET_REFCNT(obj, 1);
#endif
        PyObject_GC_Track(obj);
        return obj;
    }
    return cls->tp_alloc(cls, 0);
}

/* The offsets of cls's object slots, as pooled_dealloc's walk of tp_members finds them.
   Without memory for them pooled_dealloc keeps walking tp_members. */
static void gather_member_offsets(CodecObject *codec) {
    PyTypeObject *cls = codec->cls;
    Py_ssize_t n = 0;
    for (PyMemberDef *mp = cls->tp_members; mp != NULL && mp->name != NULL; mp++)
        if (mp->type == T_OBJECT_EX && !(mp->flags & READONLY)) n++;
    Py_ssize_t *offsets = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (offsets == NULL) return;
    n = 0;
    for (PyMemberDef *mp = cls->tp_members; mp != NULL && mp->name != NULL; mp++)
        if (mp->type == T_OBJECT_EX && !(mp->flags & READONLY)) offsets[n++] = mp->offset;
    codec->member_offsets = offsets;
    codec->nmember_offsets = n;
}

/* Put pooled_dealloc on codec's class if its instances can be pooled. */
static void install_pool(CodecObject *codec) {
    PyTypeObject *cls = codec->cls;
    if (cls->tp_dealloc == pooled_dealloc) {
        /* Another codec for the class (made again by hand): the class's instances are its
           pool's from now on (pooled_dealloc looks the class's codec up). */
        codec->pool_ok = 1;
        gather_member_offsets(codec);
        return;
    }
    if (!poolable(cls)) return;
    gather_member_offsets(codec);
    /* The tp_dealloc of a class statement (subtype_dealloc), or slotted_dealloc: both free
       exactly what pooled_dealloc frees. It is kept for enable_constructor, so that
       pure_python() frees the instances as the class statement made them do. */
    codec->pool_ok = 1;
    codec->saved_dealloc = cls->tp_dealloc;
    cls->tp_dealloc = pooled_dealloc;
}

static void drain_pool(CodecObject *codec) {
    while (codec->nfree > 0) PyObject_GC_Del(codec->free_objs[--codec->nfree]);
}

/* ------------------------------------------------------------------------------------------ */
/* encoding */

static CodecObject *resolve_sub(FieldInfo *f) {
    if (f->sub == NULL) {
        PyObject *c = type_table_get(&codecs, f->extra);
        if (c == NULL) return NULL;
        Py_INCREF(c);
        f->sub = (CodecObject *)c;
    }
    return f->sub;
}

static int encode_message(CodecObject *codec, PyObject *obj, Out *o, int depth);

/* The value of field f, without its tag. -1: give up (or an error is set). */
static int encode_value(FieldInfo *f, PyObject *v, Out *o, int depth) {
    int overflow;
    switch (f->kind) {
    case K_INT32: case K_ENUM: case K_OPEN_ENUM: {
        if (!PyLong_Check(v)) return -1;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || x < INT32_MIN || x > INT32_MAX) { PyErr_Clear(); return -1; }
        return put_varint(o, (uint64_t)x);
    }
    case K_INT64: {
        if (!PyLong_Check(v)) return -1;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return -1; }
        return put_varint(o, (uint64_t)x);
    }
    case K_UINT32: case K_UINT64: {
        if (!PyLong_Check(v)) return -1;
        unsigned long long x;
        if (!as_u64(v, &x)) return -1;
        if (f->kind == K_UINT32 && x > UINT32_MAX) return -1;
        return put_varint(o, x);
    }
    case K_SINT32: case K_SINT64: {
        if (!PyLong_Check(v)) return -1;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return -1; }
        if (f->kind == K_SINT32) {
            if (x < INT32_MIN || x > INT32_MAX) return -1;
            uint32_t z = ((uint32_t)x << 1) ^ (uint32_t)((int32_t)x >> 31);
            return put_varint(o, z);
        }
        uint64_t z = ((uint64_t)x << 1) ^ (uint64_t)(x >> 63);
        return put_varint(o, z);
    }
    case K_BOOL:
        if (v == Py_True) return put_varint(o, 1);
        if (v == Py_False) return put_varint(o, 0);
        return -1;
    case K_FIXED32: case K_SFIXED32: case K_FIXED64: case K_SFIXED64: {
        if (!PyLong_Check(v)) return -1;
        int wide = f->kind == K_FIXED64 || f->kind == K_SFIXED64;
        uint64_t bits;
        if (f->kind == K_FIXED32 || f->kind == K_FIXED64) {
            unsigned long long x;
            if (!as_u64(v, &x)) return -1;
            if (!wide && x > UINT32_MAX) return -1;
            bits = x;
        } else {
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return -1; }
            if (!wide && (x < INT32_MIN || x > INT32_MAX)) return -1;
            bits = (uint64_t)x;
        }
        unsigned char b[8];
        for (int i = 0; i < 8; i++) b[i] = (unsigned char)(bits >> (8 * i));
        return put_bytes(o, (const char *)b, wide ? 8 : 4);
    }
    case K_FLOAT: case K_DOUBLE: {
        double x;
        if (PyFloat_CheckExact(v)) x = PyFloat_AS_DOUBLE(v);
        else if (PyLong_CheckExact(v)) {
            x = PyLong_AsDouble(v);
            if (x == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        } else return -1;
        unsigned char b[8];
        if (f->kind == K_FLOAT) {
            float y = (float)x;
            /* Beyond float32's range the value is stored as infinity, as upb does. */
            if (isinf(y) && !isinf(x)) y = (float)copysign(INFINITY, x);
            if (PyFloat_Pack4(y, (char *)b, 1) < 0) { PyErr_Clear(); return -1; }
            return put_bytes(o, (const char *)b, 4);
        }
        if (PyFloat_Pack8(x, (char *)b, 1) < 0) { PyErr_Clear(); return -1; }
        return put_bytes(o, (const char *)b, 8);
    }
    case K_STRING: {
        if (!PyUnicode_Check(v)) return -1;
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (s == NULL) { PyErr_Clear(); return -1; }
        if (put_varint(o, (uint64_t)n) < 0) return -1;
        return put_bytes(o, s, n);
    }
    case K_BYTES:
        if (!PyBytes_CheckExact(v)) return -1;
        if (put_varint(o, (uint64_t)PyBytes_GET_SIZE(v)) < 0) return -1;
        return put_bytes(o, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    case K_MESSAGE: {
        CodecObject *sub = resolve_sub(f);
        if (sub == NULL || Py_TYPE(v) != sub->cls || depth >= MAX_DEPTH) return -1;
        if (out_reserve(o, 1) < 0) return -1;
        Py_ssize_t mark = o->len++;
        if (encode_message(sub, v, o, depth + 1) < 0) return -1;
        return close_len(o, mark);
    }
    }
    return -1;
}

/* Whether an implicit-presence value is written, as the Python encoder decides: a value that
   is not its zero (a negative zero float is written). 1: write, 0: skip, -1: give up (or an
   error is set, the one Python's truth test raises). */
static int implicit_written(FieldInfo *f, PyObject *v) {
    if (f->kind == K_FLOAT || f->kind == K_DOUBLE) {
        if (PyFloat_CheckExact(v)) {
            double x = PyFloat_AS_DOUBLE(v);
            return !(x == 0.0 && !signbit(x));
        }
        return PyLong_CheckExact(v) ? PyObject_IsTrue(v) : -1;
    }
    if (!PyLong_Check(v) && !PyUnicode_CheckExact(v) && !PyBytes_CheckExact(v)) return -1;
    return PyObject_IsTrue(v);
}

/* A map field: one entry per item, key and value always written, in the dict's order. */
static int encode_map(FieldInfo *f, PyObject *v, Out *o, int depth) {
    if (!PyDict_CheckExact(v)) return -1;
    FieldInfo key = *f;
    key.kind = f->key_kind;
    uint64_t key_tag = 1 << 3 | wire_of_kind[f->key_kind];
    uint64_t value_tag = 2 << 3 | wire_of_kind[f->kind];
    Py_ssize_t it = 0;
    PyObject *k, *x;
    while (PyDict_Next(v, &it, &k, &x)) {
        if (put_varint(o, (uint64_t)f->number << 3 | 2) < 0 || out_reserve(o, 1) < 0) return -1;
        Py_ssize_t mark = o->len++;
        if (put_varint(o, key_tag) < 0 || encode_value(&key, k, o, depth) < 0
                || put_varint(o, value_tag) < 0 || encode_value(f, x, o, depth) < 0
                || close_len(o, mark) < 0)
            return -1;
    }
    return 0;
}

static int encode_field(FieldInfo *f, PyObject *v, Out *o, int depth) {
    /* One test for the proto2 modes, which come first in the vocabulary. */
    if (f->mode >= M_IMPLICIT) {
        if (f->mode == M_MAP) return encode_map(f, v, o, depth);
        if (f->mode == M_IMPLICIT) {
            int written = implicit_written(f, v);
            if (written <= 0) return written;
        }
    }
    if (f->mode == M_REPEATED || f->mode == M_PACKED) {
        if (!PyList_CheckExact(v)) return -1;
        Py_ssize_t n = PyList_GET_SIZE(v);
        if (n == 0) return 0;
        if (f->mode == M_PACKED) {
            if (put_varint(o, (uint64_t)f->number << 3 | 2) < 0 || out_reserve(o, 1) < 0)
                return -1;
            Py_ssize_t mark = o->len++;
            for (Py_ssize_t i = 0; i < n; i++)
                if (encode_value(f, PyList_GET_ITEM(v, i), o, depth) < 0) return -1;
            return close_len(o, mark);
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (put_varint(o, (uint64_t)f->number << 3 | (uint64_t)f->wire) < 0) return -1;
            if (encode_value(f, PyList_GET_ITEM(v, i), o, depth) < 0) return -1;
        }
        return 0;
    }
    if (put_varint(o, (uint64_t)f->number << 3 | (uint64_t)f->wire) < 0) return -1;
    return encode_value(f, v, o, depth);
}

static int encode_message(CodecObject *codec, PyObject *obj, Out *o, int depth) {
    /* The sparse fields that are set, with their values, in field order. */
    Py_ssize_t present_idx[32];
    PyObject *present_val[32];
    Py_ssize_t npresent = 0;
    if (codec->present_offset >= 0) {
        PyObject *present = slot(obj, codec->present_offset);
        if (present == NULL || !PyDict_CheckExact(present)) return -1;
        if (PyDict_GET_SIZE(present) > (Py_ssize_t)(sizeof present_idx / sizeof present_idx[0]))
            return -1;
        Py_ssize_t it = 0;
        PyObject *key, *value;
        while (PyDict_Next(present, &it, &key, &value)) {
            PyObject *index = PyDict_GetItemWithError(codec->sparse_index, key);
            if (index == NULL) { PyErr_Clear(); return -1; }
            /* Python's encoder raises for a None kept in the present dict by hand. */
            if (value == Py_None) return -1;
            /* Insertion sort: a handful of entries at most. */
            Py_ssize_t idx = PyLong_AsSsize_t(index), k = npresent++;
            for (; k > 0 && present_idx[k - 1] > idx; k--) {
                present_idx[k] = present_idx[k - 1];
                present_val[k] = present_val[k - 1];
            }
            present_idx[k] = idx;
            present_val[k] = value;
        }
    }
    /* The fields with a slot and the sparse ones set, merged in field order; the unset sparse
       fields (most of BaseCommand's) are never visited. */
    Py_ssize_t s = 0, p = 0, nslotted = codec->nslotted;
    while (s < nslotted || p < npresent) {
        FieldInfo *f;
        PyObject *v;
        if (p >= npresent || (s < nslotted && codec->slotted[s] < present_idx[p])) {
            f = &codec->fields[codec->slotted[s++]];
            v = slot(obj, f->offset);
            if (v == NULL) return -1;
            if (v == Py_None) {
                if (f->none_fails) return -1;
                continue;
            }
        } else {
            f = &codec->fields[present_idx[p]];
            v = present_val[p++];
        }
        if (encode_field(f, v, o, depth) < 0) return -1;
    }
    PyObject *unknown = slot(obj, codec->unknown_offset);
    if (unknown == NULL || !PyBytes_CheckExact(unknown)) return -1;
    if (PyBytes_GET_SIZE(unknown))
        return put_bytes(o, PyBytes_AS_STRING(unknown), PyBytes_GET_SIZE(unknown));
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* decoding */

typedef struct {
    const unsigned char *buf;
    Py_ssize_t pos;
} Reader;

/* An unsigned varint, at most ten bytes, ending before `end`. -1: give up. */
static inline int read_varint(Reader *r, Py_ssize_t end, uint64_t *out) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->pos >= end) return -1;
        unsigned char b = r->buf[r->pos++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) { *out = result; return 0; }
    }
    return -1;
}

/* Whether n bytes are all ASCII, eight at a time. */
static inline int is_ascii(const unsigned char *p, Py_ssize_t n) {
    uint64_t bits = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        bits |= w;
    }
    for (; i < n; i++) bits |= p[i];
    return (bits & 0x8080808080808080ull) == 0;
}

/* An ASCII string of n > 1 bytes: the str PyUnicode_DecodeUTF8 would make (compact ASCII),
   without its general decoder's setup. Strings of one byte or none are left to it, since it
   hands out the interpreter's shared ones for those. */
static inline PyObject *ascii_string(const unsigned char *p, Py_ssize_t n) {
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL) memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    return s;
}

/* Skip the value of an unknown field. -1: give up (groups, bad wire types, overruns). */
static int skip_value(Reader *r, Py_ssize_t end, uint64_t tag) {
    uint64_t n;
    if (tag >> 3 == 0) return -1;
    switch (tag & 7) {
    case 0: return read_varint(r, end, &n);
    case 1: n = 8; break;
    case 2: if (read_varint(r, end, &n) < 0) return -1; break;
    case 5: n = 4; break;
    default: return -1;
    }
    if (n > (uint64_t)(end - r->pos)) return -1;
    r->pos += (Py_ssize_t)n;
    return 0;
}

static int append_unknown(PyObject **unknown, const unsigned char *p, Py_ssize_t n) {
    if (*unknown == NULL) {
        *unknown = PyByteArray_FromStringAndSize((const char *)p, n);
        return *unknown == NULL ? -1 : 0;
    }
    Py_ssize_t old = PyByteArray_GET_SIZE(*unknown);
    if (PyByteArray_Resize(*unknown, old + n) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(*unknown) + old, p, (size_t)n);
    return 0;
}

static PyObject *decode_message(CodecObject *codec, const unsigned char *buf, Py_ssize_t pos,
                                Py_ssize_t end, int depth);

/* The int of an unsigned 64-bit value: PyLong_FromLongLong where it fits, since CPython makes
   ints of one digit there without its general conversion (PyLong_FromUnsignedLongLong has
   no such path); the same int either way. */
static inline PyObject *unsigned_int(uint64_t v) {
    if (v <= (uint64_t)LLONG_MAX) return PyLong_FromLongLong((long long)v);
    return PyLong_FromUnsignedLongLong(v);
}

/* One value of field f at r->pos. Returns a new reference; NULL with no error: give up.
   For a closed enum whose number is unknown, sets *unknown_number and returns Py_None. */
static PyObject *decode_value(FieldInfo *f, Reader *r, Py_ssize_t end, int depth,
                              int *unknown_number, int64_t *number) {
    uint64_t raw;
    switch (f->kind) {
    case K_INT32:
        if (read_varint(r, end, &raw) < 0) return NULL;
        return PyLong_FromLong((int32_t)(uint32_t)raw);
    case K_INT64:
        if (read_varint(r, end, &raw) < 0) return NULL;
        return PyLong_FromLongLong((int64_t)raw);
    case K_UINT32:
        if (read_varint(r, end, &raw) < 0) return NULL;
        return PyLong_FromLongLong((long long)(uint32_t)raw);
    case K_UINT64:
        if (read_varint(r, end, &raw) < 0) return NULL;
        return unsigned_int(raw);
    case K_SINT32: {
        if (read_varint(r, end, &raw) < 0) return NULL;
        uint32_t z = (uint32_t)raw;
        return PyLong_FromLong((int32_t)((z >> 1) ^ (0u - (z & 1))));
    }
    case K_SINT64:
        if (read_varint(r, end, &raw) < 0) return NULL;
        return PyLong_FromLongLong((int64_t)((raw >> 1) ^ (0u - (raw & 1))));
    case K_BOOL:
        if (read_varint(r, end, &raw) < 0) return NULL;
        return Py_NewRef(raw ? Py_True : Py_False);
    case K_ENUM: case K_OPEN_ENUM: {
        if (read_varint(r, end, &raw) < 0) return NULL;
        int32_t x = (int32_t)(uint32_t)raw;
        if ((uint32_t)x < (uint32_t)f->nmembers && f->members[x] != NULL)
            return Py_NewRef(f->members[x]);
        PyObject *key = PyLong_FromLong(x);
        if (key == NULL) return NULL;
        PyObject *member = PyDict_GetItemWithError(f->extra, key);
        if (member != NULL) { Py_DECREF(key); return Py_NewRef(member); }
        if (PyErr_Occurred()) { Py_DECREF(key); return NULL; }
        if (f->kind == K_OPEN_ENUM) return key;
        Py_DECREF(key);
        *unknown_number = 1;
        *number = x;
        return Py_NewRef(Py_None);
    }
    case K_FIXED32: case K_SFIXED32: case K_FLOAT: {
        if (end - r->pos < 4) return NULL;
        const unsigned char *p = r->buf + r->pos;
        r->pos += 4;
        uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                        | (uint32_t)p[3] << 24;
        if (f->kind == K_FIXED32) return PyLong_FromLongLong((long long)bits);
        if (f->kind == K_SFIXED32) return PyLong_FromLong((int32_t)bits);
        double x = PyFloat_Unpack4((const char *)p, 1);
        if (x == -1.0 && PyErr_Occurred()) return NULL;
        return PyFloat_FromDouble(x);
    }
    case K_FIXED64: case K_SFIXED64: case K_DOUBLE: {
        if (end - r->pos < 8) return NULL;
        const unsigned char *p = r->buf + r->pos;
        r->pos += 8;
        uint64_t bits = 0;
        for (int i = 7; i >= 0; i--) bits = bits << 8 | p[i];
        if (f->kind == K_FIXED64) return unsigned_int(bits);
        if (f->kind == K_SFIXED64) return PyLong_FromLongLong((int64_t)bits);
        double x = PyFloat_Unpack8((const char *)p, 1);
        if (x == -1.0 && PyErr_Occurred()) return NULL;
        return PyFloat_FromDouble(x);
    }
    case K_STRING: case K_BYTES: case K_MESSAGE: {
        uint64_t n;
        if (read_varint(r, end, &n) < 0 || n > (uint64_t)(end - r->pos)) return NULL;
        const unsigned char *p = r->buf + r->pos;
        Py_ssize_t start = r->pos;
        r->pos += (Py_ssize_t)n;
        if (f->kind == K_BYTES) return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
        if (f->kind == K_STRING) {
            if (n > 1 && is_ascii(p, (Py_ssize_t)n)) return ascii_string(p, (Py_ssize_t)n);
            PyObject *s = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, NULL);
            if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
            return s;
        }
        CodecObject *sub = resolve_sub(f);
        if (sub == NULL || depth >= MAX_DEPTH) return NULL;
        return decode_message(sub, r->buf, start, r->pos, depth + 1);
    }
    }
    return NULL;
}

/* One entry of map field f at r->pos (its length first), stored into *dict (made on first
   use), as the Python decoder reads it: a key or value tag is one byte, so any other first
   byte (a longer tag) is a field it skips; a missing key or value is its default; the last
   of each wins; a closed-enum value of unknown number leaves the value as it was. -1: give
   up (or an error is set). */
static int decode_map_entry(FieldInfo *f, Reader *r, Py_ssize_t end, int depth,
                            PyObject **dict) {
    uint64_t n;
    if (read_varint(r, end, &n) < 0 || n > (uint64_t)(end - r->pos)) return -1;
    Py_ssize_t eend = r->pos + (Py_ssize_t)n;
    FieldInfo key = *f;
    key.kind = f->key_kind;
    unsigned char key_tag = (unsigned char)(1 << 3 | wire_of_kind[f->key_kind]);
    unsigned char value_tag = (unsigned char)(2 << 3 | wire_of_kind[f->kind]);
    PyObject *k = NULL, *v = NULL;
    int rc = -1;
    while (r->pos < eend) {
        unsigned char first = r->buf[r->pos];
        int unknown_number = 0;
        int64_t number;
        if (first == key_tag || first == value_tag) {
            r->pos++;
            PyObject *x = decode_value(first == key_tag ? &key : f, r, eend, depth,
                                       &unknown_number, &number);
            if (x == NULL) goto done;
            if (unknown_number) Py_DECREF(x);
            else if (first == key_tag) Py_XSETREF(k, x);
            else Py_XSETREF(v, x);
        } else {
            uint64_t tag;
            if (read_varint(r, eend, &tag) < 0 || skip_value(r, eend, tag) < 0) goto done;
        }
    }
    if (k == NULL) k = Py_NewRef(f->key_dflt);
    if (v == NULL) {
        if (f->dflt != NULL) {
            v = Py_NewRef(f->dflt);
        } else {
            CodecObject *sub = resolve_sub(f);
            if (sub == NULL || depth >= MAX_DEPTH) goto done;
            if ((v = decode_message(sub, r->buf, eend, eend, depth + 1)) == NULL) goto done;
        }
    }
    if (*dict == NULL && (*dict = PyDict_New()) == NULL) goto done;
    rc = PyDict_SetItem(*dict, k, v);
done:
    Py_XDECREF(k);
    Py_XDECREF(v);
    return rc;
}

/* Append the unknown form of a closed-enum number met inside a packed run: an unpacked varint
   field, as the Python codec writes it. */
static int append_unknown_enum(PyObject **unknown, uint32_t number, int64_t value) {
    unsigned char tmp[20];
    int n = 0;
    uint64_t v = (uint64_t)number << 3;
    while (v >= 0x80) { tmp[n++] = (unsigned char)(v | 0x80); v >>= 7; }
    tmp[n++] = (unsigned char)v;
    v = (uint64_t)value;
    while (v >= 0x80) { tmp[n++] = (unsigned char)(v | 0x80); v >>= 7; }
    tmp[n++] = (unsigned char)v;
    return append_unknown(unknown, tmp, n);
}

/* The field a tag past the table names: index + 1, negative for the packed form, 0 for none. */
static int32_t find_far_tag(CodecObject *codec, uint64_t tag) {
    uint64_t number = tag >> 3;
    Py_ssize_t lo = 0, hi = codec->nfields;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (codec->fields[mid].number < number) lo = mid + 1;
        else hi = mid;
    }
    if (lo == codec->nfields || codec->fields[lo].number != number) return 0;
    FieldInfo *f = &codec->fields[lo];
    int wire = (int)(tag & 7);
    if (wire == f->wire) return (int32_t)(lo + 1);
    if (wire == 2 && (f->mode == M_REPEATED || f->mode == M_PACKED)) return -(int32_t)(lo + 1);
    return 0;
}

static PyObject *decode_message(CodecObject *codec, const unsigned char *buf, Py_ssize_t pos,
                                Py_ssize_t end, int depth) {
    Py_ssize_t nf = codec->nfields;
    PyObject *small[128];
    PyObject **vals = nf <= 128 ? small : PyMem_Calloc((size_t)nf, sizeof(PyObject *));
    if (vals == NULL) return PyErr_NoMemory();
    /* Only the slotted fields' entries are read (sparse values go to the present dict): a
       message of many sparse fields (BaseCommand) clears just those. */
    if (vals == small) {
        if (codec->nslotted == nf) memset(small, 0, (size_t)nf * sizeof(PyObject *));
        else for (Py_ssize_t k = 0; k < codec->nslotted; k++) small[codec->slotted[k]] = NULL;
    }
    PyObject *present = NULL, *unknown = NULL, *result = NULL;
    int moved = 0;
    if (codec->present_offset >= 0 && (present = PyDict_New()) == NULL) goto done;
    Reader r = {buf, pos};
    while (r.pos < end) {
        Py_ssize_t start = r.pos;
        uint64_t tag;
        if (buf[r.pos] < 0x80) tag = buf[r.pos++];  /* a tag of one byte (r.pos < end) */
        else if (read_varint(&r, end, &tag) < 0) goto done;
        int32_t entry = tag < codec->tag_limit ? codec->by_tag[tag] : find_far_tag(codec, tag);
        if (entry == 0) {
            if (skip_value(&r, end, tag) < 0) goto done;
            if (append_unknown(&unknown, buf + start, r.pos - start) < 0) goto done;
            continue;
        }
        int packed = entry < 0;
        FieldInfo *f = &codec->fields[(packed ? -entry : entry) - 1];
        Py_ssize_t i = f - codec->fields;
        int unknown_number = 0;
        int64_t number = 0;
        if (f->mode == M_MAP) {
            if (decode_map_entry(f, &r, end, depth, &vals[i]) < 0) goto done;
            continue;
        }
        if (packed) {
            uint64_t n;
            if (read_varint(&r, end, &n) < 0 || n > (uint64_t)(end - r.pos)) goto done;
            Py_ssize_t pend = r.pos + (Py_ssize_t)n;
            if (vals[i] == NULL && (vals[i] = PyList_New(0)) == NULL) goto done;
            while (r.pos < pend) {
                unknown_number = 0;
                PyObject *v = decode_value(f, &r, pend, depth, &unknown_number, &number);
                if (v == NULL) goto done;
                if (unknown_number) {
                    Py_DECREF(v);
                    if (append_unknown_enum(&unknown, f->number, number) < 0) goto done;
                    continue;
                }
                int rc = PyList_Append(vals[i], v);
                Py_DECREF(v);
                if (rc < 0) goto done;
            }
            continue;
        }
        /* A varint of one byte (most enums, counts, small ids) for a plain integer kind or an
           enum's known member: the value decode_value gives, without its call. */
        unsigned char b0 = r.pos < end ? buf[r.pos] : 0x80;
        PyObject *v;
        if (b0 < 0x80 && f->kind >= K_INT32 && f->kind <= K_UINT64) {
            r.pos++;
            v = PyLong_FromLong(b0);
        } else if (b0 < 0x80 && (f->kind == K_ENUM || f->kind == K_OPEN_ENUM)
                   && b0 < f->nmembers && f->members[b0] != NULL) {
            r.pos++;
            v = Py_NewRef(f->members[b0]);
        } else {
            v = decode_value(f, &r, end, depth, &unknown_number, &number);
        }
        if (v == NULL) goto done;
        if (f->mode == M_ONEOF) {
            /* The Python decoder clears the other members even when this one's closed-enum
               number is unknown (and kept as an unknown field). */
            for (Py_ssize_t j = 0; j < nf; j++)
                if (j != i && codec->fields[j].mode == M_ONEOF
                        && codec->fields[j].oneof == f->oneof)
                    Py_CLEAR(vals[j]);
        }
        if (unknown_number) {
            Py_DECREF(v);
            if (append_unknown(&unknown, buf + start, r.pos - start) < 0) goto done;
            continue;
        }
        if (f->mode == M_SPARSE) {
            int rc = PyDict_SetItem(present, f->key, v);
            Py_DECREF(v);
            if (rc < 0) goto done;
        } else if (f->mode == M_REPEATED || f->mode == M_PACKED) {
            if (vals[i] == NULL && (vals[i] = PyList_New(0)) == NULL) { Py_DECREF(v); goto done; }
            int rc = PyList_Append(vals[i], v);
            Py_DECREF(v);
            if (rc < 0) goto done;
        } else {
            Py_XSETREF(vals[i], v);
        }
    }
    /* A missing required field leaves the message to the Python codec (which raises) before
       anything is made; the other missing values are made while the slots are filled. */
    for (Py_ssize_t k = 0; k < codec->nrequired; k++)
        if (vals[codec->required[k]] == NULL) goto done;
    PyObject *unknown_bytes;
    if (unknown == NULL) unknown_bytes = Py_NewRef(empty_bytes);
    else unknown_bytes = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(unknown),
                                                   PyByteArray_GET_SIZE(unknown));
    if (unknown_bytes == NULL) goto done;
    PyObject *obj = new_instance(codec);
    if (obj == NULL) { Py_DECREF(unknown_bytes); goto done; }
    /* Every slot is set below (or the object is dropped, its unset slots NULL, when memory
       runs out), so nothing is left in vals to release. */
    moved = 1;
    const Py_ssize_t *slotted = codec->slotted, *slot_offset = codec->slot_offset;
    for (Py_ssize_t k = 0; k < codec->nslotted; k++) {
        Py_ssize_t i = slotted[k];
        PyObject *v = vals[i];
        if (v == NULL) {
            int mode = codec->fields[i].mode;
            if (mode == M_REPEATED || mode == M_PACKED) v = PyList_New(0);
            else if (mode == M_MAP) v = PyDict_New();
            else if (mode == M_IMPLICIT) v = Py_NewRef(codec->fields[i].dflt);
            else v = Py_NewRef(Py_None);
            if (v == NULL) {
                for (Py_ssize_t j = k + 1; j < codec->nslotted; j++) Py_CLEAR(vals[slotted[j]]);
                Py_DECREF(unknown_bytes);
                Py_DECREF(obj);
                goto done;
            }
        }
        *(PyObject **)((char *)obj + slot_offset[k]) = v;
    }
    if (codec->present_offset >= 0) {
        *(PyObject **)((char *)obj + codec->present_offset) = present;
        present = NULL;
    }
    *(PyObject **)((char *)obj + codec->unknown_offset) = unknown_bytes;
    result = obj;
done:
    if (!moved)
        for (Py_ssize_t k = 0; k < codec->nslotted; k++) Py_XDECREF(vals[codec->slotted[k]]);
    if (vals != small) PyMem_Free(vals);
    Py_XDECREF(present);
    Py_XDECREF(unknown);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* the codec object: the message class's encode method, and its decode and decode_from */

static PyTypeObject ClassMethod_Type;

static PyObject *codec_encode(CodecObject *codec, PyObject *obj) {
    if (Py_TYPE(obj) == codec->cls) {
        Out o;
        out_init(&o);
        if (encode_message(codec, obj, &o, 0) == 0) {
            PyObject *result = PyBytes_FromStringAndSize(o.data, o.len);
            out_free(&o);
            return result;
        }
        out_free(&o);
        if (PyErr_Occurred()) return NULL;
    }
    return PyObject_CallOneArg(codec->py_encode, obj);
}

static PyObject *str_encode;  /* "encode" */

/* WireCodecAPI.encode_into: as `obj.encode()` would, without the method call and the bytes. */
static int encode_into(PyObject *obj, Out *o) {
    PyTypeObject *cls = Py_TYPE(obj);
    CodecObject *codec = (CodecObject *)type_table_get(&codecs, (PyObject *)cls);
    if (codec == NULL || codec->cls != cls
            || _PyType_Lookup(cls, str_encode) != (PyObject *)codec)
        return -1;
    return encode_message(codec, obj, o, 0);
}

static PyObject *decode_from_data(PyObject *cls, const unsigned char *data, Py_ssize_t pos,
                                  Py_ssize_t end);
static WireCodecAPI wire_api = {encode_into, decode_from_data};

static PyObject *codec_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "encode() takes no arguments");
        return NULL;
    }
    return codec_encode((CodecObject *)self, args[0]);
}

static PyObject *fallback_decode_from(CodecObject *codec, PyObject *cls, PyObject *buf,
                                      PyObject *pos, PyObject *end) {
    PyObject *args[4] = {cls, buf, pos, end};
    return PyObject_Vectorcall(codec->py_decode_from, args, 4, NULL);
}

static PyObject *decode_from_impl(CodecObject *codec, PyObject *cls, PyObject *const *args) {
    PyObject *buf = args[0];
    if ((PyTypeObject *)cls == codec->cls && PyBytes_CheckExact(buf)
            && PyLong_CheckExact(args[1]) && PyLong_CheckExact(args[2])) {
        Py_ssize_t pos = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
        if (PyErr_Occurred()) PyErr_Clear();
        else if (0 <= pos && pos <= end && end <= PyBytes_GET_SIZE(buf)) {
            PyObject *msg = decode_message(codec, (const unsigned char *)PyBytes_AS_STRING(buf),
                                           pos, end, 0);
            if (msg != NULL || PyErr_Occurred()) return msg;
        }
    }
    return fallback_decode_from(codec, cls, buf, args[1], args[2]);
}

static PyObject *decode_impl(CodecObject *codec, PyObject *cls, PyObject *data) {
    /* bytes(data), exactly as the Python codec's decode converts its argument. */
    PyObject *buf = PyBytes_CheckExact(data) ? Py_NewRef(data)
                                             : PyObject_CallOneArg((PyObject *)&PyBytes_Type, data);
    if (buf == NULL) return NULL;
    PyObject *msg = NULL;
    if ((PyTypeObject *)cls == codec->cls)
        msg = decode_message(codec, (const unsigned char *)PyBytes_AS_STRING(buf), 0,
                             PyBytes_GET_SIZE(buf), 0);
    if (msg == NULL && !PyErr_Occurred()) {
        PyObject *start = PyLong_FromLong(0), *end = PyLong_FromSsize_t(PyBytes_GET_SIZE(buf));
        if (start && end) msg = fallback_decode_from(codec, cls, buf, start, end);
        Py_XDECREF(start);
        Py_XDECREF(end);
    }
    Py_DECREF(buf);
    return msg;
}

/* decode_from(cls, buf, pos, end): the classmethod, for any class. */
static PyObject *codec_decode_from(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "decode_from() takes buf, pos and end");
        return NULL;
    }
    return decode_from_impl((CodecObject *)self, args[0], args + 1);
}

/* decode_from(buf, pos, end) for the codec's own class. */
static PyObject *codec_own_decode_from(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode_from() takes buf, pos and end");
        return NULL;
    }
    CodecObject *codec = (CodecObject *)self;
    return decode_from_impl(codec, (PyObject *)codec->cls, args);
}

/* decode(cls, data): the classmethod, for any class; data is any bytes-like object. */
static PyObject *codec_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode() takes one argument");
        return NULL;
    }
    return decode_impl((CodecObject *)self, args[0], args[1]);
}

/* decode(data) for the codec's own class. */
static PyObject *codec_own_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "decode() takes one argument");
        return NULL;
    }
    CodecObject *codec = (CodecObject *)self;
    return decode_impl(codec, (PyObject *)codec->cls, args[0]);
}

/* ------------------------------------------------------------------------------------------ */
/* the compiled constructor: cls(**kwargs) without running the generated __init__
 *
 * The generated __init__ of a class with a layout table only stores its keywords: a required
 * or optional field's value as given (optional ones default to None), a repeated field's
 * `value or []`, the sparse fields that are not None in a fresh dict of present fields
 * (runtime.codec.protowire.present_fields), and b"" as the unknown fields. Building the instance
 * here, by slot offset, saves the Python frame, the binding of thirty-odd keyword defaults
 * and a descriptor call per field.
 *
 * It is installed as the class's tp_vectorcall, which CPython (3.11) calls for cls(...) in
 * place of type.__call__ when it is set; it is not inherited, so subclasses keep the ordinary
 * path. Like the codec it is a fast path only: positional arguments, a keyword that is not a
 * field (or comes twice), a missing required keyword, a repeated value that is neither a list
 * nor None (its truth value is Python's business), or a class changed since install (another
 * __init__, __new__ or __setattr__, a slot replaced) all go to type.__call__, so every error
 * and its text is the Python __init__'s. */

static PyObject *str_init;     /* "__init__" */
static PyObject *str_unknown;  /* "_unknown" */

#define CTOR_INLINE 128

/* What the generated __init__ stores in a field's slot (slot_repeated): the value as given
   (None when not given); `value or []`; `value or {}`; an implicit field's value as given,
   its keyword's default when not given. */
enum { INIT_VALUE, INIT_LIST, INIT_DICT, INIT_IMPLICIT };

/* Whether cls still builds its instances as when the constructor went in: object's __new__,
   the generated __init__, plain attribute setting, every field in its slot. */
static int ctor_class_intact(CodecObject *codec) {
    PyTypeObject *cls = codec->cls;
    if (cls->tp_new != PyBaseObject_Type.tp_new || cls->tp_setattro != PyObject_GenericSetAttr
            || cls->tp_alloc != PyType_GenericAlloc
            || PyType_HasFeature(cls, Py_TPFLAGS_IS_ABSTRACT)
            || _PyType_Lookup(cls, str_init) != codec->py_init
            || !slot_intact(cls, str_unknown, codec->unknown_offset)
            || (codec->present_offset >= 0
                && !slot_intact(cls, codec->present_name, codec->present_offset)))
        return 0;
    for (Py_ssize_t k = 0; k < codec->nslotted; k++) {
        FieldInfo *f = &codec->fields[codec->slotted[k]];
        if (!slot_intact(cls, f->storage, f->offset)) return 0;
    }
    return 1;
}

static PyObject *ctor_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyTypeObject *cls = (PyTypeObject *)callable;
    if (nargs) return ctor_fallback(callable, args, nargs, kwnames);
    PyObject *found = type_table_get(&codecs, callable);
    if (found == NULL) return ctor_fallback(callable, args, nargs, kwnames);
    CodecObject *codec = (CodecObject *)found;
    if (!codec->ctor_on || codec->cls != cls || nkw > codec->nfields)
        return ctor_fallback(callable, args, nargs, kwnames);
    /* Any assignment to a class attribute gives the class a new version tag (they are never
       reused), so the class is looked over again only after a change; an unchanged tag is
       the common case and costs one comparison. */
    unsigned int version = valid_version_tag(cls);
    if (version == 0 || version != codec->ctor_version) {
        if (!ctor_class_intact(codec)) return ctor_fallback(callable, args, nargs, kwnames);
        /* _PyType_Lookup gave the class a tag if it had none (unless they ran out). */
        codec->ctor_version = valid_version_tag(cls);
    }

    Py_ssize_t nf = codec->nfields;
    PyObject *vals_inline[CTOR_INLINE];   /* field index -> the value given (borrowed) */
    Py_ssize_t order_inline[CTOR_INLINE]; /* keyword position -> field index */
    PyObject **vals = vals_inline;
    Py_ssize_t *order = order_inline;
    PyObject *present = NULL, *obj = NULL;
    int give_up = 1;
    if (nf > CTOR_INLINE) {
        vals = PyMem_Calloc((size_t)nf, sizeof(PyObject *));
        order = PyMem_Calloc((size_t)nf, sizeof(Py_ssize_t));
        if (vals == NULL || order == NULL) { PyErr_NoMemory(); give_up = 0; goto done; }
    } else {
        memset(vals_inline, 0, (size_t)nf * sizeof(PyObject *));
    }
    /* Callers mostly pass interned keywords in field order: try the field after the last one
       by identity, then look the keyword up (by identity, then equality) in the index. */
    Py_ssize_t cursor = 0, nrequired = 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, j);
        Py_ssize_t i;
        if (cursor < nf && codec->fields[cursor].keyword == name) {
            i = cursor;
        } else {
            /* A str subclass could compare in Python code: not for the fast path. */
            if (!PyUnicode_CheckExact(name)) goto done;
            PyObject *index = PyDict_GetItemWithError(codec->keyword_index, name);
            if (index == NULL) {
                if (PyErr_Occurred()) give_up = 0;
                goto done;  /* not a field: Python's TypeError */
            }
            i = PyLong_AsSsize_t(index);
        }
        if (vals[i] != NULL) goto done;  /* the same field twice */
        PyObject *v = args[j];
        int mode = codec->fields[i].mode;
        if (mode == M_REQUIRED) {
            nrequired++;
        } else if ((mode == M_REPEATED || mode == M_PACKED) && v != Py_None
                   && !PyList_CheckExact(v)) {
            goto done;
        } else if (mode == M_MAP && v != Py_None && !PyDict_CheckExact(v)) {
            goto done;  /* its truth value is Python's business */
        }
        vals[i] = v;
        order[j] = i;
        cursor = i + 1;
    }
    if (nrequired != codec->nrequired) goto done;  /* one is missing */
    give_up = 0;
    if (codec->present_offset >= 0) {
        /* present_fields: the sparse fields given, but for None, in the order given. */
        if ((present = PyDict_New()) == NULL) goto done;
        for (Py_ssize_t j = 0; j < nkw; j++) {
            FieldInfo *f = &codec->fields[order[j]];
            if (f->mode == M_SPARSE && args[j] != Py_None
                    && PyDict_SetItem(present, f->key, args[j]) < 0)
                goto done;
        }
    }
    if ((obj = new_instance(codec)) == NULL) goto done;
    const Py_ssize_t *slotted = codec->slotted, *slot_offset = codec->slot_offset;
    const char *slot_repeated = codec->slot_repeated;
    for (Py_ssize_t k = 0; k < codec->nslotted; k++) {
        PyObject *v = vals[slotted[k]];
        switch (slot_repeated[k]) {
        case INIT_VALUE:
            v = Py_NewRef(v ? v : Py_None);
            break;
        case INIT_LIST:
            /* `value or []`: an empty list given is replaced by a new one, like None. */
            if (v == NULL || v == Py_None || PyList_GET_SIZE(v) == 0) {
                if ((v = PyList_New(0)) == NULL) { Py_CLEAR(obj); goto done; }
            } else {
                Py_INCREF(v);
            }
            break;
        case INIT_DICT:
            if (v == NULL || v == Py_None || PyDict_GET_SIZE(v) == 0) {
                if ((v = PyDict_New()) == NULL) { Py_CLEAR(obj); goto done; }
            } else {
                Py_INCREF(v);
            }
            break;
        default:
            if (v == NULL) {
                /* The keyword's default, read as Python binds it on each call (the
                   install made sure py_init is a function). Its keys are str: the lookup
                   runs no Python code. */
                PyObject *defaults = PyFunction_GET_KW_DEFAULTS(codec->py_init);
                v = defaults != NULL && PyDict_CheckExact(defaults)
                    ? PyDict_GetItemWithError(defaults, codec->fields[slotted[k]].keyword)
                    : NULL;
                if (v == NULL) {
                    /* Python's call raises for the keyword it cannot bind: let it. */
                    give_up = !PyErr_Occurred();
                    Py_CLEAR(obj);
                    goto done;
                }
            }
            Py_INCREF(v);
        }
        *(PyObject **)((char *)obj + slot_offset[k]) = v;
    }
    if (codec->present_offset >= 0) {
        *(PyObject **)((char *)obj + codec->present_offset) = present;
        present = NULL;
    }
    *(PyObject **)((char *)obj + codec->unknown_offset) = Py_NewRef(empty_bytes);
done:
    Py_XDECREF(present);
    if (vals != vals_inline) PyMem_Free(vals);
    if (order != order_inline) PyMem_Free(order);
    if (give_up) return ctor_fallback(callable, args, nargs, kwnames);
    return obj;
}

/* install_constructor(keywords, init): make cls(**kwargs) the compiled constructor.
   keywords: the __init__ keyword of each field, in the order of the layout table; init: the
   generated __init__ (while it is the class's __init__, the constructor runs). False when the
   class cannot have one (a metaclass of its own, or a type that is not a plain heap type). */
static PyObject *codec_install_constructor(PyObject *self, PyObject *const *args,
                                           Py_ssize_t nargs) {
    CodecObject *codec = (CodecObject *)self;
    if (nargs != 2 || !PyTuple_CheckExact(args[0])
            || PyTuple_GET_SIZE(args[0]) != codec->nfields) {
        PyErr_SetString(PyExc_TypeError,
                        "install_constructor() takes one keyword per field and __init__");
        return NULL;
    }
    PyTypeObject *cls = codec->cls;
    /* The generated __init__ stores an implicit-presence field's keyword as given, its
       default being the field's default, except where that default (an enum member of a
       class defined later) cannot be the keyword's: there the keyword defaults to None,
       and `default if value is None else value` is stored, which this does not do; such a
       class keeps its __init__. A map's keyword is stored as `value or {}`, a oneof
       member's as given, as an optional field's is. */
    for (Py_ssize_t i = 0; i < codec->nfields; i++) {
        if (codec->fields[i].mode != M_IMPLICIT) continue;
        PyObject *defaults = PyFunction_Check(args[1]) ? PyFunction_GET_KW_DEFAULTS(args[1])
                                                       : NULL;
        PyObject *name = PyTuple_GET_ITEM(args[0], i);
        PyObject *dflt = defaults != NULL && PyDict_CheckExact(defaults)
                         && PyUnicode_CheckExact(name)
                         ? PyDict_GetItemWithError(defaults, name) : NULL;
        if (dflt == NULL && PyErr_Occurred()) return NULL;
        if (dflt == NULL || dflt == Py_None) Py_RETURN_FALSE;
    }
    /* A metaclass may define __call__, which the vectorcall would skip. */
    if (Py_TYPE(cls) != &PyType_Type || !PyType_HasFeature(cls, Py_TPFLAGS_HEAPTYPE)
            || PyType_HasFeature(cls, Py_TPFLAGS_IMMUTABLETYPE))
        Py_RETURN_FALSE;
    PyObject *keywords = PyTuple_New(codec->nfields), *index = PyDict_New();
    if (keywords == NULL || index == NULL) goto fail;
    for (Py_ssize_t i = 0; i < codec->nfields; i++) {
        PyObject *name = PyTuple_GET_ITEM(args[0], i);
        if (!PyUnicode_CheckExact(name)) {
            PyErr_SetString(PyExc_TypeError, "install_constructor(): keywords are str");
            goto fail;
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);  /* as the keywords of calls compiled by Python are */
        PyTuple_SET_ITEM(keywords, i, name);
        PyObject *number = PyLong_FromSsize_t(i);
        if (number == NULL) goto fail;
        int rc = PyDict_SetItem(index, name, number);
        Py_DECREF(number);
        if (rc < 0) goto fail;
    }
    if (PyDict_GET_SIZE(index) != codec->nfields) {
        PyErr_SetString(PyExc_ValueError, "install_constructor(): a keyword comes twice");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < codec->nfields; i++)
        codec->fields[i].keyword = PyTuple_GET_ITEM(keywords, i);
    for (Py_ssize_t k = 0; k < codec->nslotted; k++) {
        int mode = codec->fields[codec->slotted[k]].mode;
        codec->slot_repeated[k] = mode == M_REPEATED || mode == M_PACKED ? INIT_LIST
            : mode == M_MAP ? INIT_DICT : mode == M_IMPLICIT ? INIT_IMPLICIT : INIT_VALUE;
    }
    Py_XSETREF(codec->keywords, keywords);
    Py_XSETREF(codec->keyword_index, index);
    Py_XSETREF(codec->py_init, Py_NewRef(args[1]));
    codec->saved_vectorcall = cls->tp_vectorcall == ctor_vectorcall ? NULL : cls->tp_vectorcall;
    codec->ctor_version = 0;
    codec->ctor_on = 1;
    cls->tp_vectorcall = ctor_vectorcall;
    /* A pooled class frees its instances as slotted_dealloc would already. */
    if (cls->tp_dealloc != pooled_dealloc) install_slotted_dealloc(cls, &codec->saved_dealloc);
    else codec->pooled_here = codec->saved_dealloc != NULL;
    Py_RETURN_TRUE;
fail:
    Py_XDECREF(keywords);
    Py_XDECREF(index);
    return NULL;
}

/* enable_constructor(on): switch the installed constructor off (cls(...) runs __init__ again)
   or back on. */
static PyObject *codec_enable_constructor(PyObject *self, PyObject *on) {
    CodecObject *codec = (CodecObject *)self;
    int enable = PyObject_IsTrue(on);
    if (enable < 0) return NULL;
    if (codec->keywords == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the constructor is not installed");
        return NULL;
    }
    codec->ctor_on = enable;
    codec->cls->tp_vectorcall = enable ? ctor_vectorcall : codec->saved_vectorcall;
    if (codec->pooled_here)
        codec->cls->tp_dealloc = enable ? pooled_dealloc : codec->saved_dealloc;
    else
        enable_slotted_dealloc(codec->cls, codec->saved_dealloc, enable);
    Py_RETURN_NONE;
}

static PyObject *codec_constructor_enabled(PyObject *self, void *closure) {
    CodecObject *codec = (CodecObject *)self;
    return PyBool_FromLong(codec->ctor_on && codec->cls->tp_vectorcall == ctor_vectorcall);
}

static PyObject *codec_constructor_version(PyObject *self, void *closure) {
    return PyLong_FromUnsignedLong(((CodecObject *)self)->ctor_version);
}

static PyObject *codec_wrapped(PyObject *self, void *closure) {
    return Py_NewRef(((CodecObject *)self)->py_encode);
}

static PyGetSetDef codec_getset[] = {
    /* The codec is the class's `encode`, so Cls.encode.__wrapped__ (and, through the bound
       method, msg.encode.__wrapped__) is the generated Python encode. */
    {"__wrapped__", codec_wrapped, NULL, "The generated Python encode this stands in for.",
     NULL},
    {"constructor_enabled", codec_constructor_enabled, NULL,
     "Whether cls(...) runs the compiled constructor.", NULL},
    {"constructor_version", codec_constructor_version, NULL,
     "The class's version tag when the constructor last found it unchanged (0: none; it "
     "looks the class over on the next call).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef codec_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))codec_decode, METH_FASTCALL,
     "decode(cls, data): the message class's decode."},
    {"decode_from", (PyCFunction)(void (*)(void))codec_decode_from, METH_FASTCALL,
     "decode_from(cls, buf, pos, end): the message class's decode_from."},
    {"own_decode", (PyCFunction)(void (*)(void))codec_own_decode, METH_FASTCALL,
     "decode(data) for the codec's own class."},
    {"own_decode_from", (PyCFunction)(void (*)(void))codec_own_decode_from, METH_FASTCALL,
     "decode_from(buf, pos, end) for the codec's own class."},
    {"install_constructor", (PyCFunction)(void (*)(void))codec_install_constructor,
     METH_FASTCALL, "install_constructor(keywords, init): the compiled constructor for cls."},
    {"enable_constructor", codec_enable_constructor, METH_O,
     "enable_constructor(on): switch the compiled constructor on or off."},
    {NULL, NULL, 0, NULL},
};

static int codec_traverse(CodecObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->cls);
    Py_VISIT(self->sparse_index);
    Py_VISIT(self->py_encode);
    Py_VISIT(self->py_decode_from);
    Py_VISIT(self->present_name);
    Py_VISIT(self->keywords);
    Py_VISIT(self->keyword_index);
    Py_VISIT(self->py_init);
    for (Py_ssize_t i = 0; i < self->nfields; i++) {
        Py_VISIT(self->fields[i].key);
        Py_VISIT(self->fields[i].storage);
        Py_VISIT(self->fields[i].extra);
        Py_VISIT((PyObject *)self->fields[i].sub);
        Py_VISIT(self->fields[i].dflt);
        Py_VISIT(self->fields[i].key_dflt);
        for (Py_ssize_t n = 0; n < self->fields[i].nmembers; n++)
            Py_VISIT(self->fields[i].members[n]);
    }
    return 0;
}

static int codec_clear(CodecObject *self) {
    Py_CLEAR(self->cls);
    Py_CLEAR(self->sparse_index);
    Py_CLEAR(self->py_encode);
    Py_CLEAR(self->py_decode_from);
    Py_CLEAR(self->present_name);
    Py_CLEAR(self->keywords);
    Py_CLEAR(self->keyword_index);
    Py_CLEAR(self->py_init);
    for (Py_ssize_t i = 0; i < self->nfields; i++) {
        Py_CLEAR(self->fields[i].key);
        Py_CLEAR(self->fields[i].storage);
        self->fields[i].keyword = NULL;
        Py_CLEAR(self->fields[i].extra);
        Py_CLEAR(self->fields[i].sub);
        Py_CLEAR(self->fields[i].dflt);
        Py_CLEAR(self->fields[i].key_dflt);
        for (Py_ssize_t n = 0; n < self->fields[i].nmembers; n++)
            Py_CLEAR(self->fields[i].members[n]);
    }
    return 0;
}

static void codec_dealloc(CodecObject *self) {
    PyObject_GC_UnTrack(self);
    drain_pool(self);
    codec_clear(self);
    for (Py_ssize_t i = 0; i < self->nfields; i++) PyMem_Free(self->fields[i].members);
    PyMem_Free(self->fields);
    PyMem_Free(self->by_tag);
    PyMem_Free(self->slotted);
    PyMem_Free(self->slot_offset);
    PyMem_Free(self->slot_repeated);
    PyMem_Free(self->required);
    PyMem_Free(self->member_offsets);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Codec(cls, fields, present_slot, py_encode, py_decode_from)
   fields: (number, kind, mode, storage, extra) per field, in field-number order; storage is
   the slot name, or the key in the present dict for sparse fields. Implicit, oneof and map
   fields have a sixth item (see vocabulary.py): the default, the oneof's index, or
   (key kind number, key default, value default or None). */
/* Most enums number their members from zero up, a few dozen at most: members[n] is
   extra.get(n) for n up to the largest number below ENUM_TABLE_MAX, looked up once (the
   number -> member dicts of the layout tables are not changed after install). A number past
   the table is looked up in the dict. */
#define ENUM_TABLE_MAX 256

static int member_table(FieldInfo *f) {
    Py_ssize_t it = 0, top = -1;
    PyObject *k, *v;
    while (PyDict_Next(f->extra, &it, &k, &v)) {
        if (!PyLong_CheckExact(k)) continue;
        long n = PyLong_AsLong(k);
        if (n == -1 && PyErr_Occurred()) { PyErr_Clear(); continue; }
        if (n >= 0 && n < ENUM_TABLE_MAX && n > top) top = n;
    }
    if (top < 0) return 0;
    f->members = PyMem_Calloc((size_t)top + 1, sizeof(PyObject *));
    if (f->members == NULL) { PyErr_NoMemory(); return -1; }
    f->nmembers = top + 1;
    for (Py_ssize_t n = 0; n <= top; n++) {
        PyObject *key = PyLong_FromSsize_t(n);
        if (key == NULL) return -1;
        PyObject *member = PyDict_GetItemWithError(f->extra, key);
        Py_DECREF(key);
        if (member == NULL && PyErr_Occurred()) return -1;
        f->members[n] = Py_XNewRef(member);
    }
    return 0;
}

static PyObject *codec_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *cls, *fields, *present_slot, *py_encode, *py_decode_from;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Codec() takes positional arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!OOO:Codec", &PyType_Type, &cls, &PyTuple_Type, &fields,
                          &present_slot, &py_encode, &py_decode_from))
        return NULL;
    CodecObject *self = (CodecObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = codec_vectorcall;
    self->cls = (PyTypeObject *)Py_NewRef(cls);
    self->py_encode = Py_NewRef(py_encode);
    self->py_decode_from = Py_NewRef(py_decode_from);
    self->present_offset = -1;
    Py_ssize_t nf = PyTuple_GET_SIZE(fields);
    self->fields = PyMem_Calloc(nf ? (size_t)nf : 1, sizeof(FieldInfo));
    if (self->fields == NULL) { PyErr_NoMemory(); goto fail; }
    self->nfields = nf;
    PyObject *unknown_name = PyUnicode_InternFromString("_unknown");
    if (unknown_name == NULL) goto fail;
    self->unknown_offset = member_offset(self->cls, unknown_name);
    Py_DECREF(unknown_name);
    if (self->unknown_offset < 0) goto fail;
    if (present_slot != Py_None) {
        self->present_offset = member_offset(self->cls, present_slot);
        if (self->present_offset < 0) goto fail;
        self->present_name = Py_NewRef(present_slot);
        if ((self->sparse_index = PyDict_New()) == NULL) goto fail;
    }
    uint32_t max_number = 0, last = 0;
    for (Py_ssize_t i = 0; i < nf; i++) {
        FieldInfo *f = &self->fields[i];
        unsigned int number;
        PyObject *storage, *extra, *aux = NULL;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, i), "IiiUO|O:field", &number, &f->kind,
                              &f->mode, &storage, &extra, &aux))
            goto fail;
        if (number == 0 || number >= (1u << 29) || number <= last || f->kind <= 0
                || f->kind >= K_KIND_END || f->mode < 0 || f->mode >= M_MODE_END) {
            PyErr_Format(PyExc_ValueError, "%s: bad layout for field %u", self->cls->tp_name,
                         number);
            goto fail;
        }
        last = number;
        f->number = number;
        f->wire = wire_of_kind[f->kind];
        f->oneof = -1;
        /* Python's encoder raises for an unset required field, for a map that is None, and
           for None as a float's implicit value (its zero test fails). */
        f->none_fails = f->mode == M_REQUIRED || f->mode == M_MAP
            || (f->mode == M_IMPLICIT && (f->kind == K_FLOAT || f->kind == K_DOUBLE));
        int wants_aux = f->mode == M_IMPLICIT || f->mode == M_ONEOF || f->mode == M_MAP;
        if ((aux != NULL) != wants_aux) {
            PyErr_Format(PyExc_ValueError, "%s: field %u has the wrong number of items",
                         self->cls->tp_name, number);
            goto fail;
        }
        if (f->mode == M_IMPLICIT) {
            if (f->kind == K_MESSAGE) goto bad_aux;
            f->dflt = Py_NewRef(aux);
        } else if (f->mode == M_ONEOF) {
            if (!PyLong_Check(aux) || (f->oneof = PyLong_AsSsize_t(aux)) < 0) {
                PyErr_Clear();
                goto bad_aux;
            }
        } else if (f->mode == M_MAP) {
            PyObject *value_dflt;
            if (!PyTuple_Check(aux) || !PyArg_ParseTuple(aux, "iOO", &f->key_kind,
                                                         &f->key_dflt, &value_dflt)) {
                PyErr_Clear();
                goto bad_aux;
            }
            if (f->key_kind <= 0 || f->key_kind >= K_KIND_END || f->key_kind == K_MESSAGE
                    || (value_dflt == Py_None) != (f->kind == K_MESSAGE)) {
                f->key_dflt = NULL;
                goto bad_aux;
            }
            Py_INCREF(f->key_dflt);
            f->dflt = f->kind == K_MESSAGE ? NULL : Py_NewRef(value_dflt);
            f->wire = 2;
        }
        if (number > max_number) max_number = number;
        if ((f->kind == K_MESSAGE && !PyType_Check(extra))
                || ((f->kind == K_ENUM || f->kind == K_OPEN_ENUM) && !PyDict_Check(extra))) {
            PyErr_Format(PyExc_TypeError, "%s: field %u has the wrong table entry",
                         self->cls->tp_name, number);
            goto fail;
        }
        f->extra = Py_NewRef(extra);
        f->storage = Py_NewRef(storage);
        if ((f->kind == K_ENUM || f->kind == K_OPEN_ENUM) && member_table(f) < 0) goto fail;
        if (f->mode == M_SPARSE) {
            if (self->present_offset < 0 || f->kind != K_MESSAGE) {
                PyErr_Format(PyExc_ValueError, "%s: sparse field %u without a present slot",
                             self->cls->tp_name, number);
                goto fail;
            }
            f->offset = -1;
            f->key = Py_NewRef(storage);
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL) goto fail;
            int rc = PyDict_SetItem(self->sparse_index, storage, index);
            Py_DECREF(index);
            if (rc < 0) goto fail;
        } else if ((f->offset = member_offset(self->cls, storage)) < 0) {
            goto fail;
        }
    }
    self->slotted = PyMem_Calloc(nf ? (size_t)nf : 1, sizeof(Py_ssize_t));
    self->slot_offset = PyMem_Calloc(nf ? (size_t)nf : 1, sizeof(Py_ssize_t));
    self->slot_repeated = PyMem_Calloc(nf ? (size_t)nf : 1, 1);
    self->required = PyMem_Calloc(nf ? (size_t)nf : 1, sizeof(Py_ssize_t));
    if (self->slotted == NULL || self->slot_offset == NULL || self->slot_repeated == NULL
            || self->required == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < nf; i++) {
        FieldInfo *f = &self->fields[i];
        if (f->mode == M_REQUIRED) self->required[self->nrequired++] = i;
        if (f->mode == M_SPARSE) continue;
        self->slot_offset[self->nslotted] = f->offset;
        self->slotted[self->nslotted++] = i;
    }
    /* Tags up to two bytes (fields below 2048) are looked up in a table, others searched. */
    self->tag_limit = max_number < 2048 ? (max_number << 3) + 8 : 2048 << 3;
    self->by_tag = PyMem_Calloc(self->tag_limit, sizeof(int32_t));
    if (self->by_tag == NULL) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t i = 0; i < nf; i++) {
        FieldInfo *f = &self->fields[i];
        if (f->number >= 2048) break;
        self->by_tag[f->number << 3 | (uint32_t)f->wire] = (int32_t)(i + 1);
        int repeated = f->mode == M_REPEATED || f->mode == M_PACKED;
        if (repeated && f->wire != 2)  /* both forms of a repeated scalar are accepted */
            self->by_tag[f->number << 3 | 2] = -(int32_t)(i + 1);
    }
    if (type_table_put(&codecs, cls, (PyObject *)self) < 0) goto fail;
    install_pool(self);
    return (PyObject *)self;
bad_aux:
    PyErr_Format(PyExc_ValueError, "%s: bad layout for field %u", self->cls->tp_name, last);
fail:
    Py_DECREF(self);
    return NULL;
}

static PyTypeObject Codec_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protoframe.runtime.codec._wirecodec.Codec",
    .tp_doc = "The compiled encode/decode of one generated message class.",
    .tp_basicsize = sizeof(CodecObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = codec_new,
    .tp_dealloc = (destructor)codec_dealloc,
    .tp_traverse = (traverseproc)codec_traverse,
    .tp_clear = (inquiry)codec_clear,
    .tp_vectorcall_offset = offsetof(CodecObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = method_descr_get,
    .tp_methods = codec_methods,
    .tp_getset = codec_getset,
};

/* A classmethod that skips making a bound method for the class it was made for: looked up
   on that class (or an instance of it) it hands out one prepared callable; on a subclass it
   binds `general` to the subclass, as classmethod does. */
typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    PyObject *own;
    PyObject *general;
    PyObject *wrapped;  /* the Python function it stands in for (None: not given) */
} ClassMethodObject;

static PyObject *classmethod_get(PyObject *self, PyObject *obj, PyObject *type) {
    ClassMethodObject *cm = (ClassMethodObject *)self;
    if (type == NULL) type = (PyObject *)Py_TYPE(obj);
    if ((PyTypeObject *)type == cm->cls) return Py_NewRef(cm->own);
    return PyMethod_New(cm->general, type);
}

static PyObject *classmethod_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *cls, *own, *general, *wrapped = Py_None;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "ClassMethod() takes positional arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!OO|O:ClassMethod", &PyType_Type, &cls, &own, &general,
                          &wrapped))
        return NULL;
    ClassMethodObject *self = (ClassMethodObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->cls = (PyTypeObject *)Py_NewRef(cls);
    self->own = Py_NewRef(own);
    self->general = Py_NewRef(general);
    self->wrapped = Py_NewRef(wrapped);
    return (PyObject *)self;
}

static int classmethod_traverse(ClassMethodObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->cls);
    Py_VISIT(self->own);
    Py_VISIT(self->general);
    Py_VISIT(self->wrapped);
    return 0;
}

static int classmethod_clear(ClassMethodObject *self) {
    Py_CLEAR(self->cls);
    Py_CLEAR(self->own);
    Py_CLEAR(self->general);
    Py_CLEAR(self->wrapped);
    return 0;
}

static void classmethod_dealloc(ClassMethodObject *self) {
    PyObject_GC_UnTrack(self);
    classmethod_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef classmethod_members[] = {
    {"__func__", T_OBJECT, offsetof(ClassMethodObject, general), READONLY,
     "The function taking the class first."},
    /* On the descriptor, not on what it hands out: that is a builtin bound method, which
       takes no attributes, and wrapping it would cost a call on every decode. */
    {"__wrapped__", T_OBJECT, offsetof(ClassMethodObject, wrapped), READONLY,
     "The generated Python function this stands in for (it takes the class first)."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ClassMethod_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protoframe.runtime.codec._wirecodec.ClassMethod",
    .tp_doc = "ClassMethod(cls, own, general, wrapped=None): a classmethod with a prepared "
              "binding for cls; wrapped is the Python function it stands in for.",
    .tp_basicsize = sizeof(ClassMethodObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = classmethod_new,
    .tp_dealloc = (destructor)classmethod_dealloc,
    .tp_traverse = (traverseproc)classmethod_traverse,
    .tp_clear = (inquiry)classmethod_clear,
    .tp_descr_get = classmethod_get,
    .tp_members = classmethod_members,
};

/* ------------------------------------------------------------------------------------------ */
/* field accessors: the generated properties of optional and sparse fields, in C
 *
 * Reading an optional field (`cmd.send.num_messages`) or a sparse one (`cmd.send`) calls a
 * generated property whose getter is one line of Python (the slot's value or the field's
 * default; the present dict's entry or None). On CPython 3.11 that is a Python frame per read,
 * about seventy times the cost of a plain slot read, and it made most of the "read" in a
 * decode+read. An Accessor stands in for such a property on the class it was made for: on an
 * instance of exactly that class, while the class still keeps the field where the property
 * looks (checked again whenever the class's version tag changes), it reads and writes the slot
 * or the present dict as the property's code does. Everything else (the class itself, a
 * subclass instance, a slot not set, a present dict replaced by something that is not a dict,
 * deletion) goes to the property, so its results and errors are the property's. Looked up on
 * the class it is the property itself, so introspection sees what it always did. */

typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    PyObject *prop;       /* the generated property it stands in for */
    PyObject *name;       /* the attribute it is installed as */
    PyObject *slot_name;  /* the slot it reads: the field's, or the present dict's */
    Py_ssize_t offset;
    PyObject *key;        /* sparse: the key in the present dict; NULL for a slot */
    PyObject *dflt;       /* a slot's: what an unset (None) value reads as */
    unsigned int version; /* cls's version tag when last found intact; 0: check again */
} AccessorObject;

/* Whether the fast path holds for obj: exactly cls, unchanged since last checked. */
static int accessor_applies(AccessorObject *a, PyObject *obj) {
    PyTypeObject *cls = a->cls;
    if (Py_TYPE(obj) != cls) return 0;
    unsigned int version = valid_version_tag(cls);
    if (version != 0 && version == a->version) return 1;
    /* The property's `self._x` goes through the class's attribute hooks. */
    if (cls->tp_getattro != PyObject_GenericGetAttr || cls->tp_setattro != PyObject_GenericSetAttr
            || !slot_intact(cls, a->slot_name, a->offset)
            || _PyType_Lookup(cls, a->name) != (PyObject *)a)
        return 0;
    /* _PyType_Lookup gave the class a tag if it had none (unless they ran out). */
    a->version = valid_version_tag(cls);
    return 1;
}

static PyObject *accessor_get(PyObject *self, PyObject *obj, PyObject *type) {
    AccessorObject *a = (AccessorObject *)self;
    if (obj != NULL && accessor_applies(a, obj)) {
        PyObject *v = slot(obj, a->offset);
        if (a->key == NULL) {
            if (v != NULL) return Py_NewRef(v == Py_None ? a->dflt : v);
        } else if (v != NULL && PyDict_CheckExact(v)) {
            /* The key is an exact str: its lookup runs no Python code and cannot fail. */
            PyObject *found = PyDict_GetItemWithError(v, a->key);
            if (found != NULL) return Py_NewRef(found);
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
    }
    return Py_TYPE(a->prop)->tp_descr_get(a->prop, obj, type);
}

static int accessor_set(PyObject *self, PyObject *obj, PyObject *value) {
    AccessorObject *a = (AccessorObject *)self;
    if (value != NULL && accessor_applies(a, obj)) {
        PyObject **addr = (PyObject **)((char *)obj + a->offset);
        if (a->key == NULL) {
            Py_XSETREF(*addr, Py_NewRef(value));
            return 0;
        }
        PyObject *present = *addr;
        if (present != NULL && PyDict_CheckExact(present)) {
            if (value != Py_None) return PyDict_SetItem(present, a->key, value);
            /* pop(key, None) */
            int has = PyDict_Contains(present, a->key);
            if (has <= 0) return has;
            return PyDict_DelItem(present, a->key);
        }
    }
    return Py_TYPE(a->prop)->tp_descr_set(a->prop, obj, value);
}

static PyObject *accessor_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *cls, *prop, *name, *slot_name, *key, *dflt;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Accessor() takes positional arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!UUOO:Accessor", &PyType_Type, &cls, &PyProperty_Type,
                          &prop, &name, &slot_name, &key, &dflt))
        return NULL;
    if (key != Py_None && !PyUnicode_CheckExact(key)) {
        PyErr_SetString(PyExc_TypeError, "Accessor(): a sparse field's key is a str");
        return NULL;
    }
    Py_ssize_t offset = member_offset((PyTypeObject *)cls, slot_name);
    if (offset < 0) return NULL;
    AccessorObject *self = (AccessorObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->cls = (PyTypeObject *)Py_NewRef(cls);
    self->prop = Py_NewRef(prop);
    self->name = Py_NewRef(name);
    self->slot_name = Py_NewRef(slot_name);
    self->offset = offset;
    self->key = key == Py_None ? NULL : Py_NewRef(key);
    self->dflt = Py_NewRef(dflt);
    return (PyObject *)self;
}

static int accessor_traverse(AccessorObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->cls);
    Py_VISIT(self->prop);
    Py_VISIT(self->name);
    Py_VISIT(self->slot_name);
    Py_VISIT(self->key);
    Py_VISIT(self->dflt);
    return 0;
}

static int accessor_clear(AccessorObject *self) {
    Py_CLEAR(self->cls);
    Py_CLEAR(self->prop);
    Py_CLEAR(self->name);
    Py_CLEAR(self->slot_name);
    Py_CLEAR(self->key);
    Py_CLEAR(self->dflt);
    return 0;
}

static void accessor_dealloc(AccessorObject *self) {
    PyObject_GC_UnTrack(self);
    accessor_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef accessor_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(AccessorObject, prop), READONLY,
     "The generated property this stands in for."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject Accessor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protoframe.runtime.codec._wirecodec.Accessor",
    .tp_doc = "Accessor(cls, prop, name, slot_name, key, default): the generated property "
              "prop of an optional field (key None: the slot's value, default when None) or "
              "a sparse one (key: its entry in the present dict in slot_name), in C for "
              "instances of exactly cls.",
    .tp_basicsize = sizeof(AccessorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = accessor_new,
    .tp_dealloc = (destructor)accessor_dealloc,
    .tp_traverse = (traverseproc)accessor_traverse,
    .tp_clear = (inquiry)accessor_clear,
    .tp_descr_get = accessor_get,
    .tp_descr_set = accessor_set,
    .tp_members = accessor_members,
};

/* ------------------------------------------------------------------------------------------ */
/* member access on the generated enums' metaclass */

/* CPython 3.11's enum.EnumType defines __getattr__ (and runtime.codec.compiled.ProtoEnumType keeps
   it from 3.12 on, where EnumType dropped it), so type attribute lookup on an enum class goes
   through the generic hook, which calls type.__getattribute__ as a Python-level method (a
   wrapper object and a call) before it gets to the member. Members are class attributes
   anyway, so this looks a name up as type does, and only for a name that lookup does not find
   calls the metaclass's __getattr__, as the hook would. */

/* WireCodecAPI.decode_from (see _codec_common.h): for the frame codec, which decodes the
   protobuf parts of a frame from its own buffer. The class's decode_from must still be the
   ClassMethod the codec installed, so that pure_python() and anything else that replaces it
   is honoured. */
static PyObject *str_decode_from;  /* "decode_from" */

static PyObject *decode_from_data(PyObject *cls, const unsigned char *data, Py_ssize_t pos,
                                  Py_ssize_t end) {
    if (!PyType_Check(cls)) return NULL;
    PyObject *method = _PyType_Lookup((PyTypeObject *)cls, str_decode_from);
    if (method == NULL || Py_TYPE(method) != &ClassMethod_Type) return NULL;
    ClassMethodObject *cm = (ClassMethodObject *)method;
    if ((PyObject *)cm->cls != cls || !PyCFunction_Check(cm->own)) return NULL;
    PyObject *codec = PyCFunction_GET_SELF(cm->own);
    PyCFunction own = (PyCFunction)(void (*)(void))codec_own_decode_from;
    if (codec == NULL || Py_TYPE(codec) != &Codec_Type
            || (PyObject *)((CodecObject *)codec)->cls != cls
            || PyCFunction_GET_FUNCTION(cm->own) != own)
        return NULL;
    return decode_message((CodecObject *)codec, data, pos, end, 0);
}

static PyObject *str_getattr;          /* "__getattr__" */
static PyTypeObject *fast_metaclass;   /* the metaclass given to set_class_getattr */
static getattrofunc saved_getattro;    /* its tp_getattro before */

static PyObject *class_getattro(PyObject *cls, PyObject *name) {
    PyObject *res = PyType_Type.tp_getattro(cls, name);
    if (res != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) return res;
    /* _PyType_Lookup may not be called with an exception set (it can clear it). */
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *hook = _PyType_Lookup(Py_TYPE(cls), str_getattr);
    if (hook == NULL) {
        PyErr_Restore(type, value, traceback);
        return NULL;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    Py_INCREF(hook);
    res = PyObject_CallFunctionObjArgs(hook, cls, name, NULL);
    Py_DECREF(hook);
    return res;
}

/* set_class_getattr(metaclass, on): the lookup above for the classes of `metaclass` (a
   subclass of type), or back to what it had. Only one metaclass is ever given. */
static PyObject *set_class_getattr(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0])
            || !PyType_IsSubtype((PyTypeObject *)args[0], &PyType_Type)
            || !PyType_HasFeature((PyTypeObject *)args[0], Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "set_class_getattr() takes a metaclass and a bool");
        return NULL;
    }
    PyTypeObject *meta = (PyTypeObject *)args[0];
    int on = PyObject_IsTrue(args[1]);
    if (on < 0) return NULL;
    if (fast_metaclass != NULL && fast_metaclass != meta) {
        PyErr_SetString(PyExc_ValueError, "set_class_getattr() serves one metaclass");
        return NULL;
    }
    if (fast_metaclass == NULL) {
        fast_metaclass = (PyTypeObject *)Py_NewRef(meta);
        saved_getattro = meta->tp_getattro;
    }
    /* A metaclass without __getattr__ has type's lookup already. */
    if (on && meta->tp_getattro == saved_getattro && saved_getattro != PyType_Type.tp_getattro)
        meta->tp_getattro = class_getattro;
    if (!on && meta->tp_getattro == class_getattro) meta->tp_getattro = saved_getattro;
    Py_RETURN_NONE;
}

static PyMethodDef wirecodec_functions[] = {
    {"set_class_getattr", (PyCFunction)(void (*)(void))set_class_getattr, METH_FASTCALL,
     "set_class_getattr(metaclass, on): plain type attribute lookup for its classes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef wirecodec_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "protoframe.runtime.codec._wirecodec",
    .m_doc = "Compiled fast path of the generated protobuf codecs (see runtime/codec/compiled.py).",
    .m_size = -1,
    .m_methods = wirecodec_functions,
};

PyMODINIT_FUNC PyInit__wirecodec(void) {
    if (PyType_Ready(&Codec_Type) < 0 || PyType_Ready(&ClassMethod_Type) < 0
            || PyType_Ready(&Accessor_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&wirecodec_module);
    if (m == NULL) return NULL;
    str_init = PyUnicode_InternFromString("__init__");
    str_unknown = PyUnicode_InternFromString("_unknown");
    empty_bytes = PyBytes_FromStringAndSize(NULL, 0);
    str_encode = PyUnicode_InternFromString("encode");
    str_getattr = PyUnicode_InternFromString("__getattr__");
    str_decode_from = PyUnicode_InternFromString("decode_from");
    if (str_init == NULL || str_unknown == NULL || empty_bytes == NULL || str_encode == NULL
            || str_getattr == NULL || str_decode_from == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(&wire_api, WIRECODEC_CAPSULE, NULL);
    int added = capsule != NULL && PyModule_AddObjectRef(m, "_C_API", capsule) == 0;
    Py_XDECREF(capsule);
    if (!added) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Codec", (PyObject *)&Codec_Type) < 0
            || PyModule_AddObjectRef(m, "ClassMethod", (PyObject *)&ClassMethod_Type) < 0
            || PyModule_AddObjectRef(m, "Accessor", (PyObject *)&Accessor_Type) < 0
            || add_vocabulary(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
