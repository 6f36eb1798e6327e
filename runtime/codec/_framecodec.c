/*
 * Compiled frame codec for generated frame structs, driven by the per-struct layout tables the
 * generator writes at the end of each frames module (see runtime/codec/compiled_frames.py).
 *
 * Like runtime/codec/_wirecodec.c it is a fast path, not a second set of rules. The tables cover
 * the common frame items only: fixed-width integers, constants, sizes, checksums that run to the
 * end of their struct, embedded protobuf messages, bytes, and nested structs (always there,
 * there when bytes remain, or there when a peeked value matches); and uuids, prefixed bytes and
 * text, integers with a default, skipped trailing bytes, runs of nested structs to the end, and
 * switches on an integer key. Whatever is not well formed
 * or not plain (a bad magic, a size running past its region, a checksum mismatch, a missing
 * command body, a value of an unusual type or out of range) makes it give up without side
 * effects, and the generated Python method does the whole struct again and raises its error.
 *
 * Give-up is signalled by returning -1 (or NULL) with no Python exception set. Errors raised by
 * the Python code it calls (the protobuf codecs, the checksum functions) also mean give-up: they
 * are cleared, and the Python path raises them again in context.
 */
#include "_codec_common.h"
#include <limits.h>
#include <stdint.h>
#include <string.h>

/* Row operations (OP_*), a nested struct's presence (PRESENT_*) and the most rows a table may
   have (FRAME_MAX_ROWS): _vocabulary.h, from vocabulary.py, which says what each does. */
#define F_SIGNED 1
#define F_BIG 2
#define F_VARINT 4  /* a prefixed row's prefix is a varint (its width is 0) */
#define F_NULLABLE 32  /* a lenenc row: 0xfb (NULL) stands for None */
#define MAX_DEPTH 32
#define POOL_MAX 16  /* freed instances a struct class keeps (see "the instance pool") */

typedef struct FrameCodecObject FrameCodecObject;

/* One step of a condition's program (X_*, from vocabulary.EXPR_OPS): for X_FIELD the row
   whose integer it pushes, for X_CONST the constant; for X_ATTR the row whose message's
   attribute `name` (a reference the step owns) it pushes. */
typedef struct {
    int op;
    long long arg;
    PyObject *name;
} Step;

typedef struct {
    int op;
    int width;
    int flags;
    Py_ssize_t index;
    unsigned long long number;  /* const value, peek value */
    Py_ssize_t offset;          /* slot offset of a stored field, -1 for computed ones */
    PyObject *name;             /* the stored field's slot name (its constructor keyword) */
    PyObject *obj;              /* message class, checksum function or nested codec */
    PyObject *dispatch_attr;    /* for a protobuf envelope: the attribute naming the command */
    PyObject *body_fields;      /* ... and the dict from its value to the body attribute */
    Py_ssize_t present_offset;  /* ... and the slot of the message's dict of present bodies,
                                   or -1 to ask for each body by attribute */
    Py_ssize_t int_offset;      /* a uuid row: the slots of uuid.UUID's int and is_safe */
    Py_ssize_t safe_offset;
    Step *prog;                 /* a condition row: its program, prog_len steps */
    Py_ssize_t prog_len;
    int len_width, len_flags;   /* a blocks row: each block's length prefix, */
    Py_ssize_t block_size;      /* ... the most bytes a block holds */
    Py_ssize_t max_blocks;      /* ... and the most blocks, or -1 for no limit */
    Py_ssize_t size_offset;     /* a message_bytes row: the slot of its size in the message */
    unsigned long long range_lo, range_hi;  /* an int_range row's bounds (signed if it is) */
} Row;

/* The other rows (see vocabulary.py):
   uuid        obj uuid.UUID, dispatch_attr SafeUUID.unknown (what UUID(bytes=...) stores)
   switch      obj {key: nested codec, or the class when it has none}, body_fields
               {class: (key, codec or None)}, index its size row or -1, number its key row
   switch_key  index its switch row; the value read is kept in values[] for the switch
   struct_run  obj the nested codec, index its size row (right before it) or -1 for a run to
               the end of the region
   float       width 4 or 8 and F_BIG: an IEEE 754 single or double
   int_array   width and flags the integers'; index its count_of row
   prefixed    width and flags the prefix's; number what follows: TEXT_BYTES, _UTF8, _MUTF8;
               obj NULL, or the value when no bytes remain (read only when some do)
   default     obj the value when the bytes are not there
   count_of    index its struct_array or int_array row; the count read is kept in sizes[]
   struct_array  obj the nested codec, index its count_of row
   condition   width and flags the integer's; prog its program, over earlier int, varint and
               bool rows
   blocks      width and flags the block count's; obj the nested codec, or the class when it
               has none; len_width, len_flags, block_size and max_blocks the blocks'
   proto_prefixed  width and flags the prefix's (F_VARINT for a varint); obj the message class
   message_bytes  index the proto row whose message holds the size, obj the name of the
               size's slot in that message (its offset size_offset)
   lenenc      number TEXT_BYTES or TEXT_UTF8; flags F_NULLABLE when 0xfb stands for None
   const_bytes obj the bytes, compared on decode and written on encode (not stored)
   fixed       number TEXT_BYTES or TEXT_UTF8, index the length in bytes
   text_rest   number TEXT_UTF8: text to the end of the region
   struct_run_when  obj the nested codec, prog its condition's program (X_HAS steps read
               earlier optional struct rows): a struct_run when it holds, else None
   bits        width and flags the integer's, number the mask of its reserved bits, index (set
               by codec_new) how many bit_field rows after it are its parts
   bit_field   index its bits row, number its shift, width its bits, F_EXTRA for a bool; obj
               {value: member} and dispatch_attr the enum class for an enum part; prog its
               value: program (then it is not stored)
   derived_key index its switch row, prog the program giving the key */
#define TEXT_BYTES 0
#define TEXT_UTF8 1
#define TEXT_MUTF8 2

struct FrameCodecObject {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *cls;
    Py_ssize_t nrows;
    Row *rows;
    int check_end;              /* bytes left after the last field are an error */
    int has_temp;               /* rows that are not stored keep a value while decoding */
    PyObject *py_encode;        /* the generated Python methods, for whatever this gives up on */
    PyObject *py_decode;
    PyObject *py_decode_from;
    /* The compiled constructor; py_init is NULL until install_constructor puts it in. */
    PyObject *py_init;          /* the dataclass __init__ it stands in for */
    int ctor_on;
    unsigned int ctor_version;  /* the class's version tag when last found unchanged, or 0 */
    vectorcallfunc saved_vectorcall;
    destructor saved_dealloc;  /* cls->tp_dealloc before slotted_dealloc or pooled_dealloc,
                                  or NULL */
    int pooled_here;           /* pooled_dealloc is the one enable_constructor switches */
    /* Freed instances kept for the next decode or construction (see "the instance pool"). */
    Py_ssize_t nfree;
    PyObject *free_objs[POOL_MAX];
    int nparams;                /* the struct's params (params:), passed by the holder's row */
    int has_message_sizes;     /* message_bytes rows: encoding sets their sizes first */
    /* What encoding needs beyond the rows' own loop, known once the rows are checked: rows
       whose bytes are kept in encoded[] (size, proto, size_of_struct) and rows filled in or
       written at the end (size_rest, checksum, a delimiter). Most structs have neither, and
       skip those passes. */
    int enc_keeps, enc_fills;
    /* The compiled constructor's last keyword names (a call site passes the same constant
       tuple every time) and the row each one names, with the stored rows they leave out: a
       repeated call skips matching the names. kw_names is NULL until a call matched. */
    PyObject *kw_names;
    Py_ssize_t kw_nfill;
    short kw_rows[FRAME_MAX_ROWS];
    short kw_fill[FRAME_MAX_ROWS];
    int has_derived_key;       /* a derived_key row: encoding finds its key first */
    PyObject *delimiter;        /* a delimited struct's delimiter (its first row's), or NULL */
};

static PyTypeObject FrameCodec_Type;
static PyObject *str_decode_from, *str_encode, *str_init, *str_int, *str_is_safe;
static TypeTable ctor_codecs;  /* class -> codec, for the constructors */
static const WireCodecAPI *wire_api;  /* runtime.codec._wirecodec's, or NULL without it */

/* ------------------------------------------------------------------------------------------ */
/* the instance pool
 *
 * Building a frame makes one instance per struct (TANK's PRODUCE request is nine), and the
 * caller drops them once the bytes are out; decoding makes them again. Allocating a GC object
 * and freeing it again is a good part of a small struct's build+encode, so a struct class with
 * a compiled constructor keeps up to POOL_MAX of its freed instances, their slots cleared, and
 * the constructor and the decoder take one from there before asking tp_alloc. As in
 * runtime/codec/_wirecodec.c (the same scheme for protobuf messages), an instance taken from
 * the pool is in the state a fresh one is in (every slot NULL, untracked, no finalizer run),
 * and the caller fills every stored slot as for a fresh one.
 *
 * It is done by the class's tp_dealloc (pooled_dealloc, which frees as slotted_dealloc does),
 * only for classes whose instances are their slots and nothing else, and only for instances
 * of exactly the class: a subclass's, and any instance while the class has a finalizer, are
 * freed as before. Debug builds that count or trace references get no pool: their counts
 * would see an instance come back without _Py_NewReference's bookkeeping. */

static void pooled_dealloc(PyObject *self);

/* Whether cls's instances can go into its pool: object's allocation and freeing, no dict, no
   weak references, no finalizer, and every byte after the object header one of its own
   object slots (which pooled_dealloc clears). */
static int poolable(PyTypeObject *cls) {
#if defined(Py_TRACE_REFS) || defined(Py_GIL_DISABLED)
    (void)cls;
    return 0;
#else
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
#endif
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
    if (!own)
        while (base->tp_base != NULL && !adds_no_storage(base->tp_base)) base = base->tp_base;
    for (PyMemberDef *mp = base->tp_members; mp != NULL && mp->name != NULL; mp++) {
        if (mp->type != T_OBJECT_EX || (mp->flags & READONLY)) continue;
        PyObject **addr = (PyObject **)((char *)self + mp->offset);
        PyObject *obj = *addr;
        if (obj != NULL) {
            *addr = NULL;
            Py_DECREF(obj);
        }
    }
    FrameCodecObject *c =
        own ? (FrameCodecObject *)type_table_get(&ctor_codecs, (PyObject *)type) : NULL;
    /* Finalized once (a __del__ since removed) it would not be finalized again if one came
       back: such an instance is not handed out again. */
    if (c != NULL && c->cls == type && c->nfree < POOL_MAX && type->tp_finalize == NULL
            && !PyObject_GC_IsFinalized(self))
        c->free_objs[c->nfree++] = self;
    else
        type->tp_free(self);
    Py_DECREF(type);  /* a heap type's instances hold a reference to it */
end:
    Py_TRASHCAN_END
}

/* A new instance of c's class with every slot NULL, as tp_alloc gives it: from the pool when
   it has one. */
static inline PyObject *new_instance(FrameCodecObject *c) {
    PyTypeObject *cls = c->cls;
    if (c->nfree > 0 && cls->tp_alloc == PyType_GenericAlloc) {
        PyObject *obj = c->free_objs[--c->nfree];
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

static void drain_pool(FrameCodecObject *c) {
    while (c->nfree > 0) PyObject_GC_Del(c->free_objs[--c->nfree]);
}

/* ------------------------------------------------------------------------------------------ */
/* integers */

static unsigned long long read_uint(const unsigned char *p, int width, int big) {
    unsigned long long v = 0;
    if (big) {
        for (int i = 0; i < width; i++) v = v << 8 | p[i];
    } else {
        for (int i = width - 1; i >= 0; i--) v = v << 8 | p[i];
    }
    return v;
}

static inline void write_uint(unsigned char *p, unsigned long long v, int width, int big) {
    if (big) {
        for (int i = width - 1; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
    } else {
        for (int i = 0; i < width; i++, v >>= 8) p[i] = (unsigned char)v;
    }
}

static PyObject *int_value(unsigned long long raw, int width, int flags) {
    if (!(flags & F_SIGNED)) return PyLong_FromUnsignedLongLong(raw);
    int bits = width * 8;
    long long v = (long long)raw;
    if (bits < 64 && (raw >> (bits - 1)) & 1) v = (long long)(raw | (~0ULL << bits));
    return PyLong_FromLongLong(v);
}

/* The value of `v` when it is an int (exactly) of at most one digit, as most flags, counts
   and lengths are: read straight from the object, without the general conversion's call. */
static inline int compact_int(PyObject *v, long long *out) {
#if PY_VERSION_HEX >= 0x030C0000
    if (PyLong_CheckExact(v) && PyUnstable_Long_IsCompact((PyLongObject *)v)) {
        *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
        return 1;
    }
#else
    if (PyLong_CheckExact(v)) {
        Py_ssize_t size = Py_SIZE(v);
        if (size == 0 || size == 1 || size == -1) {
            long long d = size == 0 ? 0 : (long long)((PyLongObject *)v)->ob_digit[0];
            *out = size < 0 ? -d : d;
            return 1;
        }
    }
#endif
    return 0;
}

/* The wire form of int `value` for a field of `width` bytes; 0 if it does not fit (or is not
   an int), which the Python code reports as out of range. */
static int int_raw(PyObject *value, int width, int flags, unsigned long long *raw) {
    if (value == NULL || !PyLong_Check(value)) return 0;  /* NULL: a slot left empty */
    int bits = width * 8;
    long long small;
    if (compact_int(value, &small)) {
        if (flags & F_SIGNED) {
            if (bits < 64 && (small < -(1LL << (bits - 1)) || small >= (1LL << (bits - 1))))
                return 0;
            *raw = (unsigned long long)small & (bits < 64 ? (1ULL << bits) - 1 : ~0ULL);
            return 1;
        }
        if (small < 0 || (bits < 64 && (unsigned long long)small >> bits)) return 0;
        *raw = (unsigned long long)small;
        return 1;
    }
    if (flags & F_SIGNED) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        if (bits < 64 && (v < -(1LL << (bits - 1)) || v >= (1LL << (bits - 1)))) return 0;
        *raw = (unsigned long long)v & (bits < 64 ? (1ULL << bits) - 1 : ~0ULL);
        return 1;
    }
    unsigned long long v;
    if (!as_u64(value, &v)) return 0;
    if (bits < 64 && v >> bits) return 0;
    *raw = v;
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* decoding */

/* fn(p[:n]), the checksum function of a row. A short run is passed as a copy: for a few
   hundred bytes a bytes object costs less than a memoryview with its managed buffer. */
static PyObject *call_checksum(PyObject *fn, const char *p, Py_ssize_t n) {
    PyObject *arg = n <= 2048 ? PyBytes_FromStringAndSize(p, n)
                              : PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    if (arg == NULL) return NULL;
    PyObject *sum = PyObject_CallOneArg(fn, arg);
    Py_DECREF(arg);
    return sum;
}

static int checksum_matches(PyObject *fn, const unsigned char *p, Py_ssize_t n,
                            unsigned long long sent) {
    PyObject *actual = call_checksum(fn, (const char *)p, n);
    if (actual == NULL) return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(actual);
    Py_DECREF(actual);
    return !PyErr_Occurred() && v == sent;
}

/* The unsigned varint at p[:n]: its length (at most 10 bytes; bits past 64 are dropped, as
   runtime.codec.protowire.read_varint drops them), or 0 if it does not end inside. */
static int read_varint(const unsigned char *p, Py_ssize_t n, unsigned long long *v) {
    unsigned long long r = 0;
    for (int k = 0; k < 10 && k < n; k++) {
        r |= (unsigned long long)(p[k] & 0x7F) << (7 * k);
        if (p[k] < 0x80) {
            *v = r;
            return k + 1;
        }
    }
    return 0;
}

/* The signed value of the `width`-byte two's complement `raw`. */
static long long signed_of(unsigned long long raw, int width) {
    int bits = width * 8;
    if (bits < 64 && (raw >> (bits - 1)) & 1) return (long long)(raw | (~0ULL << bits));
    return (long long)raw;
}

/* uuid.UUID(bytes=p[:16]) as the uuid module builds it: its int and is_safe slots. */
static PyObject *make_uuid(const Row *r, const unsigned char *p) {
    PyTypeObject *type = (PyTypeObject *)r->obj;
    PyObject *v = _PyLong_FromByteArray(p, 16, 0, 0);
    if (v == NULL) return NULL;
    PyObject *u = type->tp_alloc(type, 0);
    if (u == NULL) {
        Py_DECREF(v);
        return NULL;
    }
    *(PyObject **)((char *)u + r->int_offset) = v;
    *(PyObject **)((char *)u + r->safe_offset) = Py_NewRef(r->dispatch_attr);
    return u;
}

/* Text or bytes of a prefixed row from p[:n]; NULL (an error set) on text that is not plain:
   invalid UTF-8, or modified UTF-8 beyond ASCII, which the Python code decodes itself. */
static PyObject *prefixed_value(const Row *r, const unsigned char *p, Py_ssize_t n) {
    if (r->number == TEXT_BYTES) return PyBytes_FromStringAndSize((const char *)p, n);
    if (r->number == TEXT_UTF8) return PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    for (Py_ssize_t k = 0; k < n; k++) {
        if (p[k] >= 0x80) {
            PyErr_SetString(PyExc_ValueError, "not ASCII");
            return NULL;
        }
    }
    return PyUnicode_DecodeASCII((const char *)p, n, NULL);
}

/* cls.decode_from(buf, pos, vend) of a switch case without a compiled codec; *ppos is set to
   where it stopped, which must lie in [pos, vend]. */
static PyObject *case_decode_from(PyObject *cls, PyObject *buf, Py_ssize_t *ppos,
                                  Py_ssize_t vend) {
    PyObject *method = PyObject_GetAttr(cls, str_decode_from);
    if (method == NULL) return NULL;
    PyObject *args[3] = {buf, PyLong_FromSsize_t(*ppos), PyLong_FromSsize_t(vend)};
    PyObject *result = NULL, *obj = NULL;
    if (args[1] && args[2]) result = PyObject_Vectorcall(method, args, 3, NULL);
    Py_DECREF(method);
    Py_XDECREF(args[1]);
    Py_XDECREF(args[2]);
    if (result == NULL) return NULL;
    if (PyTuple_CheckExact(result) && PyTuple_GET_SIZE(result) == 2
            && PyLong_CheckExact(PyTuple_GET_ITEM(result, 1))) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 1));
        if (!PyErr_Occurred() && *ppos <= at && at <= vend) {
            obj = Py_NewRef(PyTuple_GET_ITEM(result, 0));
            *ppos = at;
        }
    }
    Py_DECREF(result);
    return obj;
}

/* Decode the protobuf message of row `r` from buf[pos:vend] with its class's decode_from. */
static PyObject *decode_proto(const Row *r, PyObject *buf, Py_ssize_t pos, Py_ssize_t vend) {
    /* Straight from the buffer while the class's decode_from is the compiled codec's; when
       that gives up, through the method, as before. */
    PyObject *result = wire_api != NULL ? wire_api->decode_from(
        r->obj, (const unsigned char *)PyBytes_AS_STRING(buf), pos, vend) : NULL;
    if (result == NULL) {
        if (PyErr_Occurred()) return NULL;
        PyObject *method = PyObject_GetAttr(r->obj, str_decode_from);
        if (method == NULL) return NULL;
        PyObject *args[3] = {buf, PyLong_FromSsize_t(pos), PyLong_FromSsize_t(vend)};
        if (args[1] && args[2]) result = PyObject_Vectorcall(method, args, 3, NULL);
        Py_DECREF(method);
        Py_XDECREF(args[1]);
        Py_XDECREF(args[2]);
    }
    PyObject *msg = result;  /* a protobuf decode_from reads to vend and returns the message */
    if (msg == NULL || r->dispatch_attr == NULL) return msg;
    /* A protobuf envelope must carry the body its command type names. */
    PyObject *type = PyObject_GetAttr(msg, r->dispatch_attr), *body = NULL;
    if (type != NULL) {
        PyObject *name = PyDict_GetItemWithError(r->body_fields, type);
        PyObject *present = r->present_offset >= 0 && Py_TYPE(msg) == (PyTypeObject *)r->obj
                            ? slot(msg, r->present_offset) : NULL;
        if (name != NULL && present != NULL && PyDict_CheckExact(present))
            body = Py_XNewRef(PyDict_GetItemWithError(present, name));
        else if (name != NULL)
            body = PyObject_GetAttr(msg, name);
        Py_DECREF(type);
    }
    if (body == NULL || body == Py_None) {
        Py_XDECREF(body);
        Py_DECREF(msg);
        return NULL;
    }
    Py_DECREF(body);
    return msg;
}

/* The integer value of a condition's operand: an int or a bool, within 64 bits. */
static int operand(PyObject *v, long long *out) {
    if (v == NULL) return 0;
    /* Flags and kinds are mostly one-digit ints, tested by several conditions each (TANK's
       partition result has six on its error_or_flags): read them without the call. */
    if (compact_int(v, out)) return 1;
    if (!(PyLong_CheckExact(v) || PyBool_Check(v))) return 0;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The value of an int, a bool or an int subclass (an enum's member), within 64 bits. */
static int operand_any(PyObject *v, long long *out) {
    if (v == NULL || !PyLong_Check(v)) return 0;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The integer attribute `name` of the message `msg`, as a condition's operand: an int, a bool,
   or an int subclass (a protobuf enum) that compares and computes as int does. */
static int attr_operand(PyObject *msg, PyObject *name, long long *out) {
    if (msg == NULL || msg == Py_None) return 0;
    PyObject *v = PyObject_GetAttr(msg, name);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyTypeObject *t = Py_TYPE(v);
    PyNumberMethods *n = t->tp_as_number, *i = PyLong_Type.tp_as_number;
    int ok = PyLong_CheckExact(v) || PyBool_Check(v)
             || (PyLong_Check(v) && t->tp_richcompare == PyLong_Type.tp_richcompare && n != NULL
                 && n->nb_bool == i->nb_bool && n->nb_negative == i->nb_negative
                 && n->nb_add == i->nb_add && n->nb_subtract == i->nb_subtract
                 && n->nb_and == i->nb_and && n->nb_or == i->nb_or && n->nb_xor == i->nb_xor
                 && n->nb_lshift == i->nb_lshift && n->nb_rshift == i->nb_rshift);
    if (ok) {
        int overflow;
        *out = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (*out == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            ok = 0;
        }
    }
    Py_DECREF(v);
    return ok;
}

static int binary_step(int op, long long a, long long b, long long *out);

/* Whether the condition of row `r` holds: 1 or 0, -1 to give up (a value that is not a plain
   integer, or a step a 64-bit integer cannot take as Python's ints do). The operands are the
   earlier rows' decoded values (`values`), or the slots of `obj` when encoding. */
static int condition_holds(const FrameCodecObject *c, const Row *r, PyObject *const *values,
                           PyObject *obj) {
    long long stack[EXPR_MAX_DEPTH];
    int top = 0;
    for (Py_ssize_t k = 0; k < r->prog_len; k++) {
        const Step *st = &r->prog[k];
        if (st->op == X_FIELD || st->op == X_CONST || st->op == X_ATTR || st->op == X_LEN) {
            if (top >= EXPR_MAX_DEPTH) return -1;
            if (st->op == X_CONST) {
                stack[top++] = st->arg;
            } else if (st->op == X_ATTR) {
                PyObject *v = values ? values[st->arg] : slot(obj, c->rows[st->arg].offset);
                if (!attr_operand(v, st->name, &stack[top++])) return -1;
            } else if (st->op == X_LEN) {
                PyObject *v = values ? values[st->arg] : slot(obj, c->rows[st->arg].offset);
                if (v == NULL || !PyBytes_CheckExact(v)) return -1;
                stack[top++] = (long long)PyBytes_GET_SIZE(v);
            } else {
                PyObject *v = values ? values[st->arg] : slot(obj, c->rows[st->arg].offset);
                if (!operand(v, &stack[top++])) return -1;
            }
            continue;
        }
        if (st->op == X_HAS) {  /* has(x) of an optional struct: whether it is not None */
            if (top >= EXPR_MAX_DEPTH) return -1;
            PyObject *v = values ? values[st->arg] : slot(obj, c->rows[st->arg].offset);
            if (v == NULL) return -1;
            stack[top++] = v != Py_None;
            continue;
        }
        if (st->op == X_NOT || st->op == X_NEG) {
            if (top < 1) return -1;
            long long a = stack[top - 1];
            if (st->op == X_NEG && a == LLONG_MIN) return -1;
            stack[top - 1] = st->op == X_NOT ? !a : -a;
            continue;
        }
        if (top < 2) return -1;
        long long v;
        if (binary_step(st->op, stack[top - 2], stack[top - 1], &v) < 0) return -1;
        stack[--top - 1] = v;
    }
    return top == 1 ? stack[0] != 0 : -1;
}

/* a (op) b for a binary step of a program: 0 with *out set, or -1 for a step a 64-bit integer
   cannot take as Python's ints do (an overflow, a negative shift) or an unknown step. */
static int binary_step(int op, long long a, long long b, long long *out) {
    long long v;
    unsigned long long ua = (unsigned long long)a, ub = (unsigned long long)b;
    switch (op) {
        case X_AND: v = a && b; break;
        case X_OR: v = a || b; break;
        case X_BITAND: v = (long long)(ua & ub); break;
        case X_BITOR: v = (long long)(ua | ub); break;
        case X_BITXOR: v = (long long)(ua ^ ub); break;
        case X_RSHIFT:
            if (a < 0 || b < 0) return -1;
            v = b >= 63 ? 0 : a >> b;
            break;
        case X_LSHIFT:
            if (a < 0 || b < 0 || (a != 0 && (b >= 63 || a > (LLONG_MAX >> b)))) return -1;
            v = a == 0 ? 0 : a << b;
            break;
        case X_ADD:
            if ((b > 0 && a > LLONG_MAX - b) || (b < 0 && a < LLONG_MIN - b)) return -1;
            v = a + b;
            break;
        case X_SUB:
            if ((b < 0 && a > LLONG_MAX + b) || (b > 0 && a < LLONG_MIN + b)) return -1;
            v = a - b;
            break;
        case X_EQ: v = a == b; break;
        case X_NE: v = a != b; break;
        case X_LT: v = a < b; break;
        case X_LE: v = a <= b; break;
        case X_GT: v = a > b; break;
        case X_GE: v = a >= b; break;
        case X_ORV: v = a ? a : b; break;
        case X_ANDV: v = a ? b : a; break;
        default: return -1;
    }
    *out = v;
    return 0;
}

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

static PyObject *decode_struct_p(FrameCodecObject *c, PyObject *buf, Py_ssize_t *ppos,
                                 Py_ssize_t end, int depth, const long long *params);

/* A struct without params (a struct with params gives up without them). */
static inline PyObject *decode_struct(FrameCodecObject *c, PyObject *buf, Py_ssize_t *ppos,
                                      Py_ssize_t end, int depth) {
    return decode_struct_p(c, buf, ppos, end, depth, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* the rows TANK brought (issue #21): guards, values, derived fields, params and arguments,
   structs in a size of their own; see vocabulary.py */

#define F_GUARDED 8  /* a row after a guard: left out when the guard does not hold */
#define F_EXTRA 16   /* a guard: the value row it guards is 0 when left out (not None);
                        a derive row: the value is a bool */

static inline int is_tank_op(int op) {
    return (op >= OP_GUARD && op <= OP_STRUCT_SIZED) || op == OP_MARKER;
}

/* What a program reads: on decode the rows' values so far; on encode the struct's slots, and
   for the rows not stored (value rows) what encoding them computed. */
typedef struct {
    const FrameCodecObject *c;
    PyObject *const *values;     /* decoding; NULL when encoding */
    PyObject *obj;               /* encoding */
    const long long *computed;   /* encoding */
    const long long *params;     /* the struct's params (NULL for a struct without) */
    long long index;             /* an array_args item's index */
} Env;

/* operand() for the ints programs mostly read (flags, counts, bools), without its call. */
static inline int small_operand(PyObject *v, long long *out) {
    if (v == Py_True || v == Py_False) {
        *out = v == Py_True;
        return 1;
    }
    if (v != NULL && compact_int(v, out)) return 1;
    return operand(v, out);
}

/* Run the program prog[:len], leaving `want` values in out: 0, or -1 to give up (an operand
   that is not a plain integer, a step a 64-bit integer cannot take as Python's ints do).
   check_prog saw every program balance within EXPR_MAX_DEPTH and leave `want` values, so the
   stack needs no checks here; each step is its own case, as the programs run on every encode
   and decode of the structs that have them. */
static int run_prog(const Step *prog, Py_ssize_t len, const Env *e, long long *out, int want) {
    long long stack[EXPR_MAX_DEPTH];
    long long *sp = stack;  /* the next free entry; sp[-1] the top */
    for (const Step *st = prog, *stop = prog + len; st < stop; st++) {
        long long a, b;
        switch (st->op) {
        case X_CONST:
            *sp++ = st->arg;
            continue;
        case X_PARAM:
            if (e->params == NULL) return -1;
            *sp++ = e->params[st->arg];
            continue;
        case X_INDEX:
            *sp++ = e->index;
            continue;
        case X_FIELD:
            if (e->values != NULL) {
                if (!small_operand(e->values[st->arg], sp)) return -1;
            } else if (e->c->rows[st->arg].offset >= 0) {
                if (!small_operand(slot(e->obj, e->c->rows[st->arg].offset), sp)) return -1;
            } else {
                *sp = e->computed[st->arg];
            }
            sp++;
            continue;
        case X_HAS: case X_LEN: {
            /* Of a stored field (check_prog): whether it is not None, the length of its
               bytes (anything but bytes gives up, as len() of it is the Python code's). */
            PyObject *v = e->values != NULL ? e->values[st->arg]
                                            : slot(e->obj, e->c->rows[st->arg].offset);
            if (v == NULL || (st->op == X_LEN && !PyBytes_CheckExact(v))) return -1;
            *sp++ = st->op == X_HAS ? v != Py_None : (long long)PyBytes_GET_SIZE(v);
            continue;
        }
        case X_NOT:
            sp[-1] = !sp[-1];
            continue;
        case X_NEG:
            if (sp[-1] == LLONG_MIN) return -1;
            sp[-1] = -sp[-1];
            continue;
        case X_SELECT:  /* then, test, else */
            sp[-3] = sp[-2] ? sp[-3] : sp[-1];
            sp -= 2;
            continue;
        default:
            break;
        }
        /* A binary step: a (op) b. */
        b = *--sp;
        a = sp[-1];
        switch (st->op) {
        case X_AND: sp[-1] = a && b; continue;
        case X_OR: sp[-1] = a || b; continue;
        case X_BITAND: sp[-1] = (long long)((unsigned long long)a & (unsigned long long)b);
            continue;
        case X_BITOR: sp[-1] = (long long)((unsigned long long)a | (unsigned long long)b);
            continue;
        case X_EQ: sp[-1] = a == b; continue;
        case X_NE: sp[-1] = a != b; continue;
        case X_LT: sp[-1] = a < b; continue;
        case X_ANDV: sp[-1] = a ? b : a; continue;
        case X_ORV: sp[-1] = a ? a : b; continue;
        default:
            if (binary_step(st->op, a, b, &sp[-1]) < 0) return -1;
        }
    }
    if (sp - stack != want) return -1;
    memcpy(out, stack, sizeof(long long) * (size_t)want);
    return 0;
}

/* run_prog leaving one value, with the one-step programs encoding runs most (AMQP's bit
   fields are "has x", its guards "field x" of such a bit field) taken without the stack. */
static inline int run_prog1(const Step *prog, Py_ssize_t len, const Env *e, long long *out) {
    if (len == 1 && e->values == NULL) {
        Py_ssize_t offset = e->c->rows[prog->arg].offset;
        if (prog->op == X_HAS) {
            PyObject *v = slot(e->obj, offset);
            if (v == NULL) return -1;
            *out = v != Py_None;
            return 0;
        }
        if (prog->op == X_FIELD && offset < 0) {
            *out = e->computed[prog->arg];
            return 0;
        }
    }
    return run_prog(prog, len, e, out, 1);
}

/* The integer of a value or size_of_struct row at data[*ppos:end] (fixed width or varint):
   0 with *raw set, or -1. */
static int read_row_int(const Row *r, const unsigned char *data, Py_ssize_t *ppos,
                        Py_ssize_t end, unsigned long long *raw) {
    Py_ssize_t pos = *ppos;
    if (r->flags & F_VARINT) {
        int used = read_varint(data + pos, end - pos, raw);
        if (used == 0) return -1;
        *ppos = pos + used;
        return 0;
    }
    if (end - pos < r->width) return -1;
    *raw = read_uint(data + pos, r->width, r->flags & F_BIG);
    *ppos = pos + r->width;
    return 0;
}

static inline int is_bits_op(int op) { return op >= OP_BITS && op <= OP_DERIVED_KEY; }

/* Decode a row of bit fields (AMQP's, WebSocket's) or a derived switch key. A bits row keeps
   its integer in sizes[] for its bit_field rows. */
static NOINLINE int decode_bits_row(FrameCodecObject *c, const Row *r, const unsigned char *data,
                                    Py_ssize_t *ppos, Py_ssize_t end, PyObject **values,
                                    Py_ssize_t *sizes, const long long *params) {
    Py_ssize_t i = r - c->rows;
    switch (r->op) {
        case OP_BITS: {
            if (end - *ppos < r->width) return -1;
            unsigned long long raw = read_uint(data + *ppos, r->width, r->flags & F_BIG);
            if (raw & r->number) return -1;  /* a reserved bit set: the Python code's error */
            *ppos += r->width;
            sizes[i] = (Py_ssize_t)raw;
            return 0;
        }
        case OP_BIT_FIELD: {
            unsigned long long bits = (unsigned long long)sizes[r->index];
            unsigned long long v = (bits >> r->number)
                                   & (r->width >= 64 ? ~0ULL : (1ULL << r->width) - 1);
            if (r->flags & F_EXTRA) {
                values[i] = PyBool_FromLong(v != 0);
            } else if (r->obj != NULL) {
                /* An enum's member, or give up: the Python code raises for a value it lacks. */
                PyObject *key = PyLong_FromUnsignedLongLong(v);
                if (key == NULL) return -1;
                PyObject *member = PyDict_GetItemWithError(r->obj, key);
                Py_DECREF(key);
                if (member == NULL) return -1;
                values[i] = Py_NewRef(member);
            } else {
                values[i] = PyLong_FromUnsignedLongLong(v);
            }
            return values[i] == NULL ? -1 : 0;
        }
        case OP_DERIVED_KEY: {
            Env e = {c, values, NULL, NULL, params, 0};
            long long v;
            if (run_prog(r->prog, r->prog_len, &e, &v, 1) < 0) return -1;
            values[i] = PyLong_FromLongLong(v);
            return values[i] == NULL ? -1 : 0;
        }
    }
    return -1;
}

/* Decode TANK's row `r` as decode_row does; 1 when it is a guard that does not hold (the next
   row's value is set: the caller steps over it). */
static NOINLINE int decode_tank_row(FrameCodecObject *c, const Row *r, PyObject *buf,
                                    const unsigned char *data, Py_ssize_t *ppos,
                                    Py_ssize_t end, PyObject **values, Py_ssize_t *sizes,
                                    int depth, const long long *params) {
    Py_ssize_t pos = *ppos;
    Py_ssize_t i = r - c->rows;
    Env e = {c, values, NULL, NULL, params, 0};
    long long v;
    switch (r->op) {
        case OP_GUARD:
            if (run_prog(r->prog, r->prog_len, &e, &v, 1) < 0) return -1;
            if (v) return 0;
            values[i + 1] = r->flags & F_EXTRA ? PyLong_FromLong(0) : Py_NewRef(Py_None);
            return values[i + 1] == NULL ? -1 : 1;
        case OP_VALUE: {
            unsigned long long raw;
            if (read_row_int(r, data, &pos, end, &raw) < 0) return -1;
            values[i] = r->flags & F_VARINT ? PyLong_FromUnsignedLongLong(raw)
                                            : int_value(raw, r->width, r->flags);
            if (values[i] == NULL) return -1;
            break;
        }
        case OP_DERIVE:
            if (run_prog(r->prog, r->prog_len, &e, &v, 1) < 0) return -1;
            values[i] = r->flags & F_EXTRA ? PyBool_FromLong(v != 0) : PyLong_FromLongLong(v);
            if (values[i] == NULL) return -1;
            break;
        case OP_STRUCT_ARGS: {
            long long args[EXPR_MAX_DEPTH];
            if (run_prog(r->prog, r->prog_len, &e, args, (int)r->number) < 0) return -1;
            values[i] = decode_struct_p((FrameCodecObject *)r->obj, buf, &pos, end, depth + 1,
                                        args);
            if (values[i] == NULL) return -1;
            break;
        }
        case OP_ARRAY_ARGS: {
            /* A negative count is none, as range() makes it. */
            long long count = r->index < 0 ? (params == NULL ? -1 : params[r->width])
                              : r->flags & F_EXTRA ? -1 : (long long)sizes[r->index];
            if (r->flags & F_EXTRA && !small_operand(values[r->index], &count)) return -1;
            PyObject *list = PyList_New(0);
            if ((values[i] = list) == NULL) return -1;
            for (e.index = 0; e.index < count; e.index++) {
                long long args[EXPR_MAX_DEPTH];
                Py_ssize_t before = pos;
                if (run_prog(r->prog, r->prog_len, &e, args, (int)r->number) < 0) return -1;
                PyObject *item = decode_struct_p((FrameCodecObject *)r->obj, buf, &pos, end,
                                                 depth + 1, args);
                if (item == NULL) return -1;
                int rc = PyList_Append(list, item);
                Py_DECREF(item);
                /* An item of no bytes: a count too large to run here is the Python code's. */
                if (rc < 0 || pos == before) return -1;
            }
            break;
        }
        case OP_SIZE_OF_STRUCT: {
            unsigned long long raw;
            if (read_row_int(r, data, &pos, end, &raw) < 0) return -1;
            if ((r->flags & F_SIGNED && signed_of(raw, r->width) < 0)
                    || raw > (unsigned long long)PY_SSIZE_T_MAX)
                return -1;
            sizes[i] = (Py_ssize_t)raw;
            break;
        }
        case OP_MARKER:  /* there (True) when a peek matches it, else False */
            if (end - pos >= r->width
                    && read_uint(data + pos, r->width, r->flags & F_BIG) == r->number) {
                pos += r->width;
                values[i] = Py_NewRef(Py_True);
            } else {
                values[i] = Py_NewRef(Py_False);
            }
            break;
        case OP_STRUCT_SIZED: {
            if (sizes[r->index] > end - pos) return -1;
            Py_ssize_t vend = pos + sizes[r->index];
            values[i] = decode_struct_p((FrameCodecObject *)r->obj, buf, &pos, vend, depth + 1,
                                        NULL);
            if (values[i] == NULL || pos != vend) return -1;
            break;
        }
        default:
            return -1;
    }
    *ppos = pos;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* TubeMQ's rows (issue #21): blocks and protobuf messages with a length prefix of their own */

/* The length prefix of row `r` at data[*ppos:end]: the length, with *ppos after the prefix, or
   -1 to give up (a prefix cut short, negative, or giving more bytes than remain). */
static Py_ssize_t read_length_prefix(const Row *r, const unsigned char *data, Py_ssize_t *ppos,
                                     Py_ssize_t end) {
    Py_ssize_t pos = *ppos;
    unsigned long long raw;
    if (r->flags & F_VARINT) {
        int used = read_varint(data + pos, end - pos, &raw);
        if (used == 0) return -1;
        pos += used;
    } else {
        if (end - pos < r->width) return -1;
        raw = read_uint(data + pos, r->width, r->flags & F_BIG);
        pos += r->width;
        if (r->flags & F_SIGNED && signed_of(raw, r->width) < 0) return -1;
    }
    if (raw > (unsigned long long)(end - pos)) return -1;
    *ppos = pos;
    return (Py_ssize_t)raw;
}

/* The nested struct of a blocks row from buf[pos:vend], which it must fill: by its compiled
   codec, or its class's decode_from. */
static PyObject *decode_block_content(const Row *r, PyObject *buf, Py_ssize_t pos,
                                      Py_ssize_t vend, int depth) {
    PyObject *obj;
    Py_ssize_t at = pos;
    if (Py_TYPE(r->obj) == &FrameCodec_Type)
        obj = decode_struct((FrameCodecObject *)r->obj, buf, &at, vend, depth + 1);
    else
        obj = case_decode_from(r->obj, buf, &at, vend);
    if (obj != NULL && at != vend) Py_CLEAR(obj);  /* content left over: the Python code's error */
    return obj;
}

/* A blocks row at *ppos: the block count, then each block's length and bytes; their bytes
   joined are the nested struct. One block (or none) is decoded where it lies, as the joined
   bytes would be: decode_from reads only buf[pos:end]. NULL to give up. */
static PyObject *decode_blocks(const Row *r, PyObject *buf, const unsigned char *data,
                               Py_ssize_t *ppos, Py_ssize_t end, int depth) {
    Py_ssize_t pos = *ppos, first, total = 0;
    if (end - pos < r->width) return NULL;
    unsigned long long count = read_uint(data + pos, r->width, r->flags & F_BIG);
    pos += r->width;
    /* A negative count reads as no blocks in the Python code: left to it. */
    if ((r->flags & F_SIGNED && signed_of(count, r->width) < 0)
            || (r->max_blocks >= 0 && count > (unsigned long long)r->max_blocks))
        return NULL;
    first = pos;
    /* Each block takes its prefix's bytes at least, so the loop ends inside the region. */
    for (unsigned long long k = 0; k < count; k++) {
        if (end - pos < r->len_width) return NULL;
        unsigned long long n = read_uint(data + pos, r->len_width, r->len_flags & F_BIG);
        pos += r->len_width;
        if ((r->len_flags & F_SIGNED && signed_of(n, r->len_width) < 0)
                || n > (unsigned long long)r->block_size || n > (unsigned long long)(end - pos))
            return NULL;
        pos += (Py_ssize_t)n;
        total += (Py_ssize_t)n;
    }
    PyObject *obj;
    if (count <= 1) {
        Py_ssize_t at = count ? first + r->len_width : pos;
        obj = decode_block_content(r, buf, at, at + total, depth);
    } else {
        PyObject *content = PyBytes_FromStringAndSize(NULL, total);
        if (content == NULL) return NULL;
        char *out = PyBytes_AS_STRING(content);
        for (Py_ssize_t at = first; at < pos;) {
            Py_ssize_t n = (Py_ssize_t)read_uint(data + at, r->len_width, r->len_flags & F_BIG);
            memcpy(out, data + at + r->len_width, (size_t)n);
            out += n;
            at += r->len_width + n;
        }
        obj = decode_block_content(r, content, 0, total, depth);
        Py_DECREF(content);
    }
    if (obj != NULL) *ppos = pos;
    return obj;
}

/* Decode TubeMQ's row `r` at *ppos into values[i]: 0, or -1 to give up. */
static int decode_tubemq_row(const Row *r, PyObject *buf, const unsigned char *data,
                             Py_ssize_t *ppos, Py_ssize_t end, PyObject **value, int depth) {
    if (r->op == OP_BLOCKS) {
        *value = decode_blocks(r, buf, data, ppos, end, depth);
        return *value == NULL ? -1 : 0;
    }
    Py_ssize_t pos = *ppos, n = read_length_prefix(r, data, &pos, end);
    if (n < 0) return -1;
    if ((*value = decode_proto(r, buf, pos, pos + n)) == NULL) return -1;
    *ppos = pos + n;
    return 0;
}

/* Decode TubeMQ's guarded row `r` (struct_when, proto_prefixed_when) at *ppos into values[i]:
   None when its condition does not hold. 0, or -1 to give up. */
static int decode_guarded_row(FrameCodecObject *c, const Row *r, PyObject *buf,
                              const unsigned char *data, Py_ssize_t *ppos, Py_ssize_t end,
                              PyObject **values, int depth) {
    Py_ssize_t i = r - c->rows;
    int holds = condition_holds(c, r, values, NULL);
    if (holds < 0) return -1;
    if (!holds) {
        values[i] = Py_NewRef(Py_None);
        return 0;
    }
    if (r->op == OP_STRUCT_WHEN) {
        values[i] = decode_struct((FrameCodecObject *)r->obj, buf, ppos, end, depth + 1);
        return values[i] == NULL ? -1 : 0;
    }
    return decode_tubemq_row(r, buf, data, ppos, end, &values[i], depth);
}

/* Decode Pravega's table-entry rows (issue #21): a len_value is stepped over, an int_when read
   as a condition row is. 0, or -1 to give up. */
static int decode_pravega_row(FrameCodecObject *c, const Row *r, const unsigned char *data,
                              Py_ssize_t *ppos, Py_ssize_t end, PyObject **values) {
    Py_ssize_t i = r - c->rows;
    if (r->op == OP_INT_WHEN) {
        int holds = condition_holds(c, r, values, NULL);
        if (holds < 0) return -1;
        if (!holds) {
            values[i] = Py_NewRef(Py_None);
            return 0;
        }
    }
    if (end - *ppos < r->width) return -1;
    if (r->op == OP_INT_WHEN) {
        unsigned long long raw = read_uint(data + *ppos, r->width, r->flags & F_BIG);
        if ((values[i] = int_value(raw, r->width, r->flags)) == NULL) return -1;
    }
    *ppos += r->width;
    return 0;
}

/* Decode Pravega's optional tail rows at *ppos: a prefixed_optional's bytes or text when
   bytes remain (None when not), a default_bool's byte when it remains (its default when not).
   0, or -1 to give up. */
static int decode_optional_row(const Row *r, const unsigned char *data, Py_ssize_t *ppos,
                               Py_ssize_t end, PyObject **value) {
    if (*ppos >= end) {
        *value = Py_NewRef(r->op == OP_DEFAULT_BOOL ? r->obj : Py_None);
        return 0;
    }
    if (r->op == OP_DEFAULT_BOOL) {
        *value = PyBool_FromLong(data[(*ppos)++] != 0);
        return 0;
    }
    Py_ssize_t pos = *ppos, n = read_length_prefix(r, data, &pos, end);
    if (n < 0 || (*value = prefixed_value(r, data + pos, n)) == NULL) return -1;
    *ppos = pos + n;
    return 0;
}

/* The bytes of message_bytes row `r` at *ppos, sized by the integer in the message its proto
   row decoded (into values[]): 0, or -1 to give up on a size that is not a plain int, is
   negative or runs past `end`, which the Python code reports. */
static int message_bytes(FrameCodecObject *c, const Row *r, const unsigned char *data,
                         Py_ssize_t *ppos, Py_ssize_t end, PyObject **values) {
    const Row *holder = &c->rows[r->index];
    PyObject *msg = values[r->index];
    if (msg == NULL || Py_TYPE(msg) != (PyTypeObject *)holder->obj) return -1;
    PyObject *n = slot(msg, r->size_offset);
    if (n == NULL || !PyLong_CheckExact(n)) return -1;
    Py_ssize_t size = PyLong_AsSsize_t(n);
    if (size == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (size < 0 || size > end - *ppos) return -1;
    PyObject *v = PyBytes_FromStringAndSize((const char *)data + *ppos, size);
    if ((values[r - c->rows] = v) == NULL) return -1;
    *ppos += size;
    return 0;
}

/* A lenenc row at *ppos (MySQL's length-encoded string): its value, None for NULL when the row
   is nullable, with *ppos after it; NULL to give up. Any form of the length is read, as the
   Python reader reads it; 0xff, a NULL where none may be, or a length past `end` give up. */
static PyObject *decode_lenenc(const Row *r, const unsigned char *data, Py_ssize_t *ppos,
                               Py_ssize_t end) {
    Py_ssize_t pos = *ppos;
    if (pos >= end) return NULL;
    unsigned int first = data[pos++];
    unsigned long long n = first;
    if (first == 0xfb) {
        if (!(r->flags & F_NULLABLE)) return NULL;
        *ppos = pos;
        return Py_NewRef(Py_None);
    }
    if (first > 0xfb) {
        int width = first == 0xfc ? 2 : first == 0xfd ? 3 : first == 0xfe ? 8 : 0;
        if (width == 0 || end - pos < width) return NULL;
        n = read_uint(data + pos, width, 0);
        pos += width;
    }
    if (n > (unsigned long long)(end - pos)) return NULL;
    PyObject *v = prefixed_value(r, data + pos, (Py_ssize_t)n);
    if (v != NULL) *ppos = pos + (Py_ssize_t)n;
    return v;
}

/* Nested structs of row r's codec from *ppos up to `end`, as a list; NULL to give up. */
static PyObject *decode_run(const Row *r, PyObject *buf, Py_ssize_t *ppos, Py_ssize_t end,
                            int depth) {
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    while (*ppos < end) {
        Py_ssize_t before = *ppos;
        PyObject *item = decode_struct((FrameCodecObject *)r->obj, buf, ppos, end, depth + 1);
        if (item == NULL || PyList_Append(list, item) < 0 || *ppos == before) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(item);
    }
    return list;
}

/* A const_bytes, fixed or text_rest row at *ppos: 0 with *ppos after it (and, but for a
   constant, its value in *value), -1 to give up (too few bytes, another constant, text that is
   not UTF-8). */
static int decode_fixed_row(const Row *r, const unsigned char *data, Py_ssize_t *ppos,
                            Py_ssize_t end, PyObject **value) {
    Py_ssize_t pos = *ppos;
    Py_ssize_t n = r->op == OP_TEXT_REST ? end - pos
                   : r->op == OP_FIXED ? r->index : PyBytes_GET_SIZE(r->obj);
    if (end - pos < n) return -1;
    if (r->op == OP_CONST_BYTES) {
        if (memcmp(data + pos, PyBytes_AS_STRING(r->obj), (size_t)n) != 0) return -1;
    } else if ((*value = prefixed_value(r, data + pos, n)) == NULL) {
        return -1;
    }
    *ppos = pos + n;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* masked bytes and rules (WebSocket's frame, issue #21) */

#define F_KEY_OPTIONAL 64  /* a masked_bytes row: its key may be None (the bytes sent as they are) */

/* The bytes of the key of masked_bytes row `r` (the value of its key row: an unsigned integer
   of r->width bytes, written in its byte order, or bytes) into key[8], or *bytes_key pointing
   at a bytes key's own; its length, 0 for a key of None where one may be, -1 to give up. */
static Py_ssize_t mask_key(const Row *r, PyObject *v, unsigned char *key,
                           const unsigned char **bytes_key) {
    if (v == Py_None && r->flags & F_KEY_OPTIONAL) return 0;
    if (r->width == 0) {
        if (v == NULL || !PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) == 0) return -1;
        *bytes_key = (const unsigned char *)PyBytes_AS_STRING(v);
        return PyBytes_GET_SIZE(v);
    }
    unsigned long long raw;
    if (!int_raw(v, r->width, r->flags & ~F_SIGNED, &raw)) return -1;
    write_uint(key, raw, r->width, r->flags & F_BIG);
    *bytes_key = key;
    return r->width;
}

/* q[:n] = p[:n] XOR-ed with key[:klen] repeated (masking twice unmasks). */
static void mask_into(unsigned char *q, const unsigned char *p, Py_ssize_t n,
                      const unsigned char *key, Py_ssize_t klen) {
    Py_ssize_t j = 0;
    if (klen == 4) {
        /* WebSocket's key: a word at a time. */
        uint32_t k, w;
        memcpy(&k, key, 4);
        for (; j + 4 <= n; j += 4) {
            memcpy(&w, p + j, 4);
            w ^= k;
            memcpy(q + j, &w, 4);
        }
    }
    for (; j < n; j++) q[j] = p[j] ^ key[j % klen];
}

/* A masked_bytes row at *ppos: its bytes, sized by its size row (r->index: a size row's size,
   a derive row's value) or to `end` (-1), unmasked with its key row's (r->number) value.
   0, or -1 to give up (a size that is not a plain int, is negative or runs past `end`). */
static int decode_masked(FrameCodecObject *c, const Row *r, const unsigned char *data,
                         Py_ssize_t *ppos, Py_ssize_t end, PyObject **values,
                         const Py_ssize_t *sizes) {
    Py_ssize_t pos = *ppos, n = end - pos;
    if (r->index >= 0) {
        if (c->rows[r->index].op == OP_SIZE) {
            n = sizes[r->index];
        } else {
            long long v;
            if (!operand(values[r->index], &v) || v < 0 || v > (long long)PY_SSIZE_T_MAX)
                return -1;
            n = (Py_ssize_t)v;
        }
        if (n > end - pos) return -1;
    }
    unsigned char buf[8];
    const unsigned char *key = NULL;
    Py_ssize_t klen = mask_key(r, values[r->number], buf, &key);
    if (klen < 0) return -1;
    PyObject *v = PyBytes_FromStringAndSize(klen ? NULL : (const char *)data + pos, n);
    if ((values[r - c->rows] = v) == NULL) return -1;
    if (klen) mask_into((unsigned char *)PyBytes_AS_STRING(v), data + pos, n, key, klen);
    *ppos = pos + n;
    return 0;
}

/* The integer value of a rule's operand: an int, a bool, or an int subclass (a spec enum)
   that compares and computes as int does. */
static int int_like(PyObject *v, long long *out) {
    if (v == NULL) return 0;
    PyTypeObject *t = Py_TYPE(v);
    PyNumberMethods *n = t->tp_as_number, *i = PyLong_Type.tp_as_number;
    int ok = PyLong_CheckExact(v) || PyBool_Check(v)
             || (PyLong_Check(v) && t->tp_richcompare == PyLong_Type.tp_richcompare && n != NULL
                 && n->nb_bool == i->nb_bool && n->nb_negative == i->nb_negative
                 && n->nb_add == i->nb_add && n->nb_subtract == i->nb_subtract
                 && n->nb_and == i->nb_and && n->nb_or == i->nb_or && n->nb_xor == i->nb_xor
                 && n->nb_lshift == i->nb_lshift && n->nb_rshift == i->nb_rshift);
    if (!ok) return 0;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* Whether the rule of requires row `r` holds over the decoded values (`values`) or, encoding,
   the slots of `obj`: 1 or 0, -1 to give up (an operand that is not a plain integer, a length
   of anything but bytes, a step a 64-bit integer cannot take as Python's ints do). */
static int rule_holds(const FrameCodecObject *c, const Row *r, PyObject *const *values,
                      PyObject *obj) {
    long long stack[EXPR_MAX_DEPTH];
    int top = 0;
    for (Py_ssize_t k = 0; k < r->prog_len; k++) {
        const Step *st = &r->prog[k];
        PyObject *v = NULL;
        if (st->op == X_FIELD || st->op == X_LEN || st->op == X_HAS)
            v = values ? values[st->arg] : slot(obj, c->rows[st->arg].offset);
        switch (st->op) {
        case X_FIELD: case X_CONST: case X_LEN: case X_HAS:
            if (top >= EXPR_MAX_DEPTH) return -1;
            if (st->op == X_CONST) {
                stack[top] = st->arg;
            } else if (st->op == X_FIELD) {
                if (!int_like(v, &stack[top])) return -1;
            } else if (st->op == X_LEN) {
                if (v == NULL || !PyBytes_CheckExact(v)) return -1;
                stack[top] = (long long)PyBytes_GET_SIZE(v);
            } else {
                if (v == NULL) return -1;
                stack[top] = v != Py_None;
            }
            top++;
            break;
        case X_NOT: case X_NEG: {
            if (top < 1) return -1;
            long long a = stack[top - 1];
            if (st->op == X_NEG && a == LLONG_MIN) return -1;
            stack[top - 1] = st->op == X_NOT ? !a : -a;
            break;
        }
        default: {
            if (top < 2) return -1;
            long long out;
            if (binary_step(st->op, stack[top - 2], stack[top - 1], &out) < 0) return -1;
            stack[--top - 1] = out;
        }
        }
    }
    return top == 1 ? stack[0] != 0 : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* terminated bytes and text, delimited structs (WebSocket's handshake, MariaDB's strings) */

/* Where the bytes `t` (of tlen) first occur in p[:n], or -1. */
static Py_ssize_t find_bytes(const unsigned char *p, Py_ssize_t n, const char *t,
                             Py_ssize_t tlen) {
    if (tlen == 1) {
        const unsigned char *at = memchr(p, (unsigned char)t[0], (size_t)n);
        return at == NULL ? -1 : at - p;
    }
    for (Py_ssize_t k = 0; k + tlen <= n; k++) {
        const unsigned char *at = memchr(p + k, (unsigned char)t[0], (size_t)(n - k - tlen + 1));
        if (at == NULL) return -1;
        k = at - p;
        if (memcmp(at, t, (size_t)tlen) == 0) return k;
    }
    return -1;
}

/* A terminated row at *ppos: the bytes or text before its terminator (r->obj), *ppos after
   the terminator. 0, or -1 to give up (no terminator before `end`, text that is not UTF-8). */
static int decode_terminated(const Row *r, const unsigned char *data, Py_ssize_t *ppos,
                             Py_ssize_t end, PyObject **value) {
    Py_ssize_t pos = *ppos, tlen = PyBytes_GET_SIZE(r->obj);
    Py_ssize_t n = find_bytes(data + pos, end - pos, PyBytes_AS_STRING(r->obj), tlen);
    if (n < 0 || (*value = prefixed_value(r, data + pos, n)) == NULL) return -1;
    *ppos = pos + n + tlen;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* integers with a range, MySQL's length-encoded integers (MariaDB's packets) */

#define F_NONZERO 128       /* an int_range row: 0 is not allowed */
#define F_LENENC_CONST 256  /* a lenenc_int row: a constant (number), not stored */

/* Whether the raw value of int_range row `r` is in its range (lo, hi: signed when the row is). */
static int in_range(const Row *r, unsigned long long raw) {
    if (r->flags & F_NONZERO && raw == 0) return 0;
    if (r->flags & F_SIGNED) {
        long long v = signed_of(raw, r->width);
        return (long long)r->range_lo <= v && v <= (long long)r->range_hi;
    }
    return r->range_lo <= raw && raw <= r->range_hi;
}

/* An int_range row at *ppos (as an int or varint row reads it): 0, or -1 to give up (too few
   bytes, a value out of its range, which the Python code reports). */
static int decode_int_range(const Row *r, const unsigned char *data, Py_ssize_t *ppos,
                            Py_ssize_t end, PyObject **value) {
    unsigned long long raw;
    Py_ssize_t pos = *ppos;
    if (r->flags & F_VARINT) {
        int used = read_varint(data + pos, end - pos, &raw);
        if (used == 0) return -1;
        pos += used;
    } else {
        if (end - pos < r->width) return -1;
        raw = read_uint(data + pos, r->width, r->flags & F_BIG);
        pos += r->width;
    }
    if (!in_range(r, raw)) return -1;
    *value = r->flags & F_VARINT ? PyLong_FromUnsignedLongLong(raw)
                                 : int_value(raw, r->width, r->flags);
    if (*value == NULL) return -1;
    *ppos = pos;
    return 0;
}

/* The length-encoded integer at *ppos, any form: 1 with *v set, 0 for NULL (0xfb), -1 to give
   up (0xff, too few bytes); *ppos after it. */
static int read_lenenc_int(const unsigned char *data, Py_ssize_t *ppos, Py_ssize_t end,
                           unsigned long long *v) {
    Py_ssize_t pos = *ppos;
    if (pos >= end) return -1;
    unsigned int first = data[pos++];
    if (first == 0xfb) {
        *ppos = pos;
        return 0;
    }
    *v = first;
    if (first > 0xfb) {
        int width = first == 0xfc ? 2 : first == 0xfd ? 3 : first == 0xfe ? 8 : 0;
        if (width == 0 || end - pos < width) return -1;
        *v = read_uint(data + pos, width, 0);
        pos += width;
    }
    *ppos = pos;
    return 1;
}

/* A lenenc_int row at *ppos: 0 (its value, or None for NULL when nullable, in *value; a
   constant checked), -1 to give up (NULL where none may be, another constant). */
static int decode_lenenc_int(const Row *r, const unsigned char *data, Py_ssize_t *ppos,
                             Py_ssize_t end, PyObject **value) {
    unsigned long long v = 0;
    int got = read_lenenc_int(data, ppos, end, &v);
    if (got < 0 || (got == 0 && (!(r->flags & F_NULLABLE) || r->flags & F_LENENC_CONST)))
        return -1;
    if (r->flags & F_LENENC_CONST) return v == r->number ? 0 : -1;
    *value = got == 0 ? Py_NewRef(Py_None) : PyLong_FromUnsignedLongLong(v);
    return *value == NULL ? -1 : 0;
}

/* The number of items of a struct_array or int_array row: what its count_of row read or
   wrote (counts[]), or what its program gives over earlier integer rows (count: an
   expression, MariaDB's scramble): on decode of values, on encode of obj's slots. -1 to
   give up: a program that does not run, or a count below zero (range() makes it none: left
   to the Python code). */
static Py_ssize_t array_count(const FrameCodecObject *c, const Row *r, PyObject *const *values,
                              PyObject *obj, const Py_ssize_t *counts) {
    if (r->prog == NULL) return counts[r->index];
    Env e = {c, values, obj, NULL, NULL, 0};
    long long n;
    if (run_prog(r->prog, r->prog_len, &e, &n, 1) < 0 || n < 0 || n > PY_SSIZE_T_MAX) return -1;
    return (Py_ssize_t)n;
}

/* Decode row `r` (one of the rows after OP_STRUCT) of codec `c` at *ppos: 0 on success with
   *ppos after it and its value in values[], -1 to give up. */
static NOINLINE int decode_row(FrameCodecObject *c, const Row *r, PyObject *buf,
                               const unsigned char *data, Py_ssize_t *ppos, Py_ssize_t end,
                               PyObject **values, Py_ssize_t *sizes, int depth) {
    Py_ssize_t pos = *ppos;
    Py_ssize_t i = r - c->rows;
    switch (r->op) {
        case OP_SWITCH_KEY: case OP_DEFAULT: {
            if (end - pos < r->width) {
                if (r->op != OP_DEFAULT) return -1;
                values[i] = Py_NewRef(r->obj);
                break;
            }
            unsigned long long raw = read_uint(data + pos, r->width, r->flags & F_BIG);
            pos += r->width;
            if ((values[i] = int_value(raw, r->width, r->flags)) == NULL) return -1;
            break;
        }
        case OP_UUID:
            if (end - pos < 16) return -1;
            if ((values[i] = make_uuid(r, data + pos)) == NULL) return -1;
            pos += 16;
            break;
        case OP_PREFIXED: {
            unsigned long long raw;
            if (r->obj != NULL && pos >= end) {  /* when bytes remain; its default when not */
                values[i] = Py_NewRef(r->obj);
                break;
            }
            if (r->flags & F_VARINT) {
                int used = read_varint(data + pos, end - pos, &raw);
                if (used == 0) return -1;
                pos += used;
            } else {
                if (end - pos < r->width) return -1;
                raw = read_uint(data + pos, r->width, r->flags & F_BIG);
                pos += r->width;
            }
            if (r->flags & F_SIGNED && signed_of(raw, r->width) < 0) return -1;
            if (raw > (unsigned long long)(end - pos)) return -1;
            values[i] = prefixed_value(r, data + pos, (Py_ssize_t)raw);
            if (values[i] == NULL) return -1;
            pos += (Py_ssize_t)raw;
            break;
        }
        case OP_STRUCT_RUN: {
            Py_ssize_t vend = end;
            if (r->index >= 0) {  /* up to the end of the bytes its size row read */
                if (sizes[r->index] > end - pos) return -1;
                vend = pos + sizes[r->index];
            }
            PyObject *list = PyList_New(0);
            if ((values[i] = list) == NULL) return -1;
            while (pos < vend) {
                Py_ssize_t before = pos;
                PyObject *item = decode_struct((FrameCodecObject *)r->obj, buf, &pos, vend,
                                               depth + 1);
                if (item == NULL) return -1;
                int rc = PyList_Append(list, item);
                Py_DECREF(item);
                if (rc < 0 || pos == before) return -1;
            }
            break;
        }
        case OP_SWITCH: {
            Py_ssize_t vend = end;
            if (r->index >= 0) {
                if (sizes[r->index] > end - pos) return -1;
                vend = pos + sizes[r->index];
            }
            PyObject *found = PyDict_GetItemWithError(r->obj, values[r->number]);
            if (found == NULL) return -1;
            if (Py_TYPE(found) == &FrameCodec_Type)
                values[i] = decode_struct((FrameCodecObject *)found, buf, &pos, vend, depth + 1);
            else
                values[i] = case_decode_from(found, buf, &pos, vend);
            if (values[i] == NULL || (r->index >= 0 && pos != vend)) return -1;
            break;
        }
        case OP_SKIP_TRAILING:
            pos = end;
            break;
        case OP_VARINT: {
            unsigned long long raw;
            int used = read_varint(data + pos, end - pos, &raw);
            if (used == 0) return -1;
            pos += used;
            if ((values[i] = PyLong_FromUnsignedLongLong(raw)) == NULL) return -1;
            break;
        }
        case OP_BOOL:
            if (end - pos < 1) return -1;
            values[i] = PyBool_FromLong(data[pos++] != 0);
            break;
        case OP_COUNT_OF: {
            if (end - pos < r->width) return -1;
            unsigned long long raw = read_uint(data + pos, r->width, r->flags & F_BIG);
            pos += r->width;
            /* A negative count reads as none in the Python code: left to it. */
            if ((r->flags & F_SIGNED && signed_of(raw, r->width) < 0)
                    || raw > (unsigned long long)PY_SSIZE_T_MAX)
                return -1;
            sizes[i] = (Py_ssize_t)raw;
            break;
        }
        case OP_CONDITION: {
            int holds = condition_holds(c, r, values, NULL);
            if (holds < 0) return -1;
            if (!holds) {
                values[i] = Py_NewRef(Py_None);
                break;
            }
            if (end - pos < r->width) return -1;
            unsigned long long raw = read_uint(data + pos, r->width, r->flags & F_BIG);
            pos += r->width;
            if ((values[i] = int_value(raw, r->width, r->flags)) == NULL) return -1;
            break;
        }
        case OP_STRUCT_ARRAY: {
            Py_ssize_t n = array_count(c, r, values, NULL, sizes);
            if (n < 0) return -1;
            PyObject *list = PyList_New(0);
            if ((values[i] = list) == NULL) return -1;
            for (Py_ssize_t k = 0; k < n; k++) {
                PyObject *item = decode_struct((FrameCodecObject *)r->obj, buf, &pos, end,
                                               depth + 1);
                if (item == NULL) return -1;
                int rc = PyList_Append(list, item);
                Py_DECREF(item);
                if (rc < 0) return -1;
            }
            break;
        }
        case OP_BLOCKS: case OP_PROTO_PREFIXED:
            if (decode_tubemq_row(r, buf, data, &pos, end, &values[i], depth) < 0) return -1;
            break;
        case OP_STRUCT_WHEN: case OP_PROTO_PREFIXED_WHEN:
            if (decode_guarded_row(c, r, buf, data, &pos, end, values, depth) < 0) return -1;
            break;
        case OP_LEN_VALUE: case OP_INT_WHEN:
            if (decode_pravega_row(c, r, data, &pos, end, values) < 0) return -1;
            break;
        case OP_PREFIXED_OPTIONAL: case OP_DEFAULT_BOOL:
            if (decode_optional_row(r, data, &pos, end, &values[i]) < 0) return -1;
            break;
        case OP_MESSAGE_BYTES:
            if (message_bytes(c, r, data, &pos, end, values) < 0) return -1;
            break;
        case OP_LENENC:
            if ((values[i] = decode_lenenc(r, data, &pos, end)) == NULL) return -1;
            break;
        case OP_CONST_BYTES: case OP_FIXED: case OP_TEXT_REST:
            if (decode_fixed_row(r, data, &pos, end, &values[i]) < 0) return -1;
            break;
        case OP_INT_ARRAY: {
            Py_ssize_t n = array_count(c, r, values, NULL, sizes);
            /* Checked before the list is made, so a count past the bytes costs nothing. */
            if (n < 0 || n > (end - pos) / r->width) return -1;
            PyObject *list = PyList_New(n);
            if ((values[i] = list) == NULL) return -1;
            for (Py_ssize_t k = 0; k < n; k++, pos += r->width) {
                PyObject *item = int_value(read_uint(data + pos, r->width, r->flags & F_BIG),
                                           r->width, r->flags);
                if (item == NULL) return -1;
                PyList_SET_ITEM(list, k, item);
            }
            break;
        }
        case OP_FLOAT: {
            /* What struct's "f" and "d" formats read, by the same functions. */
            if (end - pos < r->width) return -1;
            const char *p = (const char *)data + pos;
            int le = !(r->flags & F_BIG);
            double d = r->width == 4 ? PyFloat_Unpack4(p, le) : PyFloat_Unpack8(p, le);
            if (d == -1.0 && PyErr_Occurred()) return -1;
            pos += r->width;
            if ((values[i] = PyFloat_FromDouble(d)) == NULL) return -1;
            break;
        }
        case OP_MASKED_BYTES:
            if (decode_masked(c, r, data, &pos, end, values, sizes) < 0) return -1;
            break;
        case OP_REQUIRES:  /* after every field: the values are all there */
            if (rule_holds(c, r, values, NULL) != 1) return -1;
            break;
        case OP_TERMINATED:
            if (decode_terminated(r, data, &pos, end, &values[i]) < 0) return -1;
            break;
        case OP_INT_RANGE:
            if (decode_int_range(r, data, &pos, end, &values[i]) < 0) return -1;
            break;
        case OP_LENENC_INT:
            if (decode_lenenc_int(r, data, &pos, end, &values[i]) < 0) return -1;
            break;
        case OP_LENENC_OPTIONAL:  /* when bytes remain, else None */
            values[i] = pos < end ? decode_lenenc(r, data, &pos, end) : Py_NewRef(Py_None);
            if (values[i] == NULL) return -1;
            break;
        case OP_STRUCT_RUN_WHEN: {
            int holds = condition_holds(c, r, values, NULL);
            if (holds < 0) return -1;
            if (!holds) {
                values[i] = Py_NewRef(Py_None);
                break;
            }
            if ((values[i] = decode_run(r, buf, &pos, end, depth)) == NULL) return -1;
            break;
        }
        default:
            return -1;
    }
    *ppos = pos;
    return 0;
}

/* A size_range row (TANK's consume response header): its fields end where its size says,
   which must be inside the region (sizes[] keeps the region's end for its end row); its end
   row: the fields filled the size (else the Python code's error), the region's end is back. */
static NOINLINE int decode_range_row(FrameCodecObject *c, const Row *r,
                                     const unsigned char *data, Py_ssize_t *ppos,
                                     Py_ssize_t *pend, Py_ssize_t *sizes) {
    if (r->op == OP_SIZE_RANGE_END) {
        if (*ppos != *pend) return -1;
        *pend = sizes[r->index];
        return 0;
    }
    if (*pend - *ppos < r->width) return -1;
    unsigned long long raw = read_uint(data + *ppos, r->width, r->flags & F_BIG);
    *ppos += r->width;
    if (raw > (unsigned long long)(*pend - *ppos)) return -1;
    sizes[r - c->rows] = *pend;
    *pend = *ppos + (Py_ssize_t)raw;
    return 0;
}

/* A switch decoding another struct each way (TANK's frame): F_EXTRA, obj its cases sent to
   the client, dispatch_attr those sent to the server. The direction is the one value in
   `params` the decode entry points pass (none: give up, as nested in another struct). */
static NOINLINE int decode_directed_switch(FrameCodecObject *c, const Row *r, PyObject *buf,
                                           Py_ssize_t *ppos, Py_ssize_t end, PyObject **values,
                                           const Py_ssize_t *sizes, int depth,
                                           const long long *params) {
    Py_ssize_t pos = *ppos, vend = end;
    if (params == NULL) return -1;
    if (r->index >= 0) {
        if (sizes[r->index] > end - pos) return -1;
        vend = pos + sizes[r->index];
    }
    PyObject *cases = params[0] ? r->dispatch_attr : r->obj;
    PyObject *found = PyDict_GetItemWithError(cases, values[r->number]);
    if (found == NULL) return -1;  /* no case that way: the Python code's error */
    PyObject *v = Py_TYPE(found) == &FrameCodec_Type
        ? decode_struct((FrameCodecObject *)found, buf, &pos, vend, depth + 1)
        : case_decode_from(found, buf, &pos, vend);
    if (v == NULL) return -1;
    if (r->index >= 0 && pos != vend) {
        Py_DECREF(v);
        return -1;
    }
    values[r - c->rows] = v;
    *ppos = pos;
    return 0;
}

/* Decode codec's struct from buf[*pos:end]; on success *pos is the position after it. NULL
   means give up (any exception is cleared by the caller). */
static PyObject *decode_struct_p(FrameCodecObject *c, PyObject *buf, Py_ssize_t *ppos,
                                 Py_ssize_t end, int depth, const long long *params) {
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(buf);
    Py_ssize_t pos = *ppos;
    Py_ssize_t sizes[FRAME_MAX_ROWS];
    PyObject *values[FRAME_MAX_ROWS];
    PyObject *obj = NULL;
    Py_ssize_t i, n = c->nrows;
    if (depth > MAX_DEPTH || (c->nparams > 0 && params == NULL)) return NULL;
    for (i = 0; i < n; i++) values[i] = NULL;
    for (i = 0; i < n; i++) {
        const Row *r = &c->rows[i];
        switch (r->op) {
        case OP_INT: case OP_CONST: case OP_SIZE: case OP_SIZE_REST: case OP_CHECKSUM: {
            if (pos + r->width > end) goto give_up;
            unsigned long long raw = read_uint(data + pos, r->width, r->flags & F_BIG);
            pos += r->width;
            if (r->op == OP_INT) {
                if ((values[i] = int_value(raw, r->width, r->flags)) == NULL) goto give_up;
            } else if (r->op == OP_CONST) {
                if (raw != r->number) goto give_up;
            } else if (r->op == OP_SIZE) {
                if (r->flags & F_SIGNED) {
                    long long v = signed_of(raw, r->width);
                    if (v < 0 || (unsigned long long)v > (unsigned long long)PY_SSIZE_T_MAX)
                        goto give_up;
                    raw = (unsigned long long)v;
                } else if (raw > (unsigned long long)PY_SSIZE_T_MAX) {
                    goto give_up;
                }
                sizes[i] = (Py_ssize_t)raw;
            } else if (r->op == OP_SIZE_REST) {
                /* A negative signed size is the Python code's error. The number counts
                   `number` (adjust:, two's complement) beyond the rest: MariaDB's packet
                   length leaves out its sequence id. */
                if ((r->flags & F_SIGNED && signed_of(raw, r->width) < 0)
                        || raw > (unsigned long long)PY_SSIZE_T_MAX / 2)
                    goto give_up;
                long long rest = (long long)raw - (long long)r->number;
                if (rest < 0 || rest > end - pos) goto give_up;
                end = pos + (Py_ssize_t)rest;
            } else if (!checksum_matches(r->obj, data + pos, end - pos, raw)) {
                goto give_up;
            }
            break;
        }
        case OP_PROTO: case OP_BYTES: {
            Py_ssize_t vend = end;
            if (r->index >= 0) {
                if (sizes[r->index] > end - pos) goto give_up;
                vend = pos + sizes[r->index];
            }
            if (r->op == OP_BYTES)
                values[i] = PyBytes_FromStringAndSize((const char *)data + pos, vend - pos);
            else
                values[i] = decode_proto(r, buf, pos, vend);
            if (values[i] == NULL) goto give_up;
            pos = vend;
            break;
        }
        case OP_STRUCT: {
            int present = 1;
            if (r->index == PRESENT_REMAINING) {
                present = pos < end;
            } else if (r->index == PRESENT_PEEK) {
                present = pos + r->width <= end
                          && read_uint(data + pos, r->width, r->flags & F_BIG) == r->number;
            }
            if (!present) {
                values[i] = Py_NewRef(Py_None);
                break;
            }
            values[i] = decode_struct((FrameCodecObject *)r->obj, buf, &pos, end, depth + 1);
            if (values[i] == NULL) goto give_up;
            break;
        }
        case OP_SIZE_RANGE: case OP_SIZE_RANGE_END:
            if (decode_range_row(c, r, data, &pos, &end, sizes) < 0) goto give_up;
            break;
        case OP_DELIMITED: {
            /* The first row: the fields end where the delimiter first occurs. */
            Py_ssize_t at = find_bytes(data + pos, end - pos, PyBytes_AS_STRING(r->obj),
                                       PyBytes_GET_SIZE(r->obj));
            if (at < 0) goto give_up;
            end = pos + at;
            break;
        }
        default: {
            /* The rows issue #21 added, out of line: the loop over Pulsar's rows stays as
               small as it was. */
            int rc = is_tank_op(r->op)
                ? decode_tank_row(c, r, buf, data, &pos, end, values, sizes, depth, params)
                : is_bits_op(r->op) ? decode_bits_row(c, r, data, &pos, end, values, sizes, params)
                : r->op == OP_SWITCH && r->flags & F_EXTRA
                ? decode_directed_switch(c, r, buf, &pos, end, values, sizes, depth, params)
                : decode_row(c, r, buf, data, &pos, end, values, sizes, depth);
            if (rc < 0) goto give_up;
            i += rc;  /* a guard that does not hold: the row it guards is left out */
            break;
        }
        }
    }
    if (c->check_end && pos != end) goto give_up;
    if (c->delimiter != NULL) {
        /* The fields fill the bytes before the delimiter (the Python code's error if not). */
        if (pos != end) goto give_up;
        pos = end + PyBytes_GET_SIZE(c->delimiter);
    }
    obj = new_instance(c);
    if (obj == NULL) goto give_up;
    for (i = 0; i < n; i++) {
        if (c->rows[i].offset >= 0) {
            *(PyObject **)((char *)obj + c->rows[i].offset) = values[i];
            values[i] = NULL;
        }
    }
    if (c->has_temp)
        for (i = 0; i < n; i++) Py_CLEAR(values[i]);
    *ppos = pos;
    return obj;
give_up:
    for (i = 0; i < n; i++) Py_XDECREF(values[i]);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* encoding */

static int out_write(Out *o, const char *p, Py_ssize_t n) {
    if (out_reserve(o, n) < 0) return -1;
    memcpy(o->data + o->len, p, n);
    o->len += n;
    return 0;
}

static int out_varint(Out *o, unsigned long long v) {
    if (out_reserve(o, 10) < 0) return -1;
    unsigned char *p = (unsigned char *)o->data + o->len;
    int k = 0;
    while (v >= 0x80) {
        p[k++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[k++] = (unsigned char)v;
    o->len += k;
    return 0;
}

static inline int out_uint(Out *o, unsigned long long v, int width, int flags) {
    if (out_reserve(o, width) < 0) return -1;
    unsigned char *p = (unsigned char *)o->data + o->len;
    o->len += width;
    /* The widths rows have, as constants, so that each loop unrolls. */
    int big = flags & F_BIG;
    switch (width) {
        case 1: p[0] = (unsigned char)v; break;
        case 2: write_uint(p, v, 2, big); break;
        case 4: write_uint(p, v, 4, big); break;
        case 8: write_uint(p, v, 8, big); break;
        default: write_uint(p, v, width, big);
    }
    return 0;
}

/* Whether `v` (a byte count) fits a size field of the row's width. */
static int size_fits(const Row *r, Py_ssize_t v) {
    int bits = r->width * 8 - ((r->flags & F_SIGNED) ? 1 : 0);
    return bits >= 63 || (unsigned long long)v >> bits == 0;
}

static int encode_struct_p(FrameCodecObject *c, PyObject *obj, Out *o, int depth,
                           const long long *params);

static inline int encode_struct(FrameCodecObject *c, PyObject *obj, Out *o, int depth) {
    return encode_struct_p(c, obj, o, depth, NULL);
}

/* The (key, codec or None) of a switch row for the body `v`, or NULL (maybe with an error)
   when its class is not one of the cases. */
static PyObject *switch_case(const Row *r, PyObject *v) {
    if (v == NULL) return NULL;
    PyObject *found = PyDict_GetItemWithError(r->body_fields, (PyObject *)Py_TYPE(v));
    if (found == NULL || !PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) != 2) return NULL;
    return found;
}

/* Append the body `v` of switch row `r`: by its compiled codec, or its encode method. */
static int encode_switch_body(const Row *r, PyObject *v, Out *o, int depth) {
    PyObject *found = switch_case(r, v);
    if (found == NULL) return -1;
    PyObject *codec = PyTuple_GET_ITEM(found, 1);
    if (Py_TYPE(codec) == &FrameCodec_Type)
        return encode_struct((FrameCodecObject *)codec, v, o, depth + 1);
    PyObject *b = PyObject_CallMethodNoArgs(v, str_encode);
    if (b == NULL) return -1;
    int rc = PyBytes_CheckExact(b) ? out_write(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
                                   : -1;
    Py_DECREF(b);
    return rc;
}

/* The 16 bytes of uuid.UUID `v` (exactly that class, its int in range) into p. */
static int uuid_bytes(const Row *r, PyObject *v, unsigned char *p) {
    if (v == NULL || Py_TYPE(v) != (PyTypeObject *)r->obj) return -1;
    PyObject *num = slot(v, r->int_offset);
    if (num == NULL || !PyLong_CheckExact(num)) return -1;
#if PY_VERSION_HEX >= 0x030D0000
    return _PyLong_AsByteArray((PyLongObject *)num, p, 16, 0, 0, 1);
#else
    return _PyLong_AsByteArray((PyLongObject *)num, p, 16, 0, 0);
#endif
}

/* The bytes a prefixed row writes for `v`: bytes as they are, str as UTF-8, or as modified
   UTF-8 when it is ASCII without NUL (the same bytes); NULL for anything else. */
static const char *prefixed_bytes(const Row *r, PyObject *v, Py_ssize_t *n) {
    if (v == NULL) return NULL;
    if (r->number == TEXT_BYTES) {
        if (!PyBytes_CheckExact(v)) return NULL;
        *n = PyBytes_GET_SIZE(v);
        return PyBytes_AS_STRING(v);
    }
    if (!PyUnicode_CheckExact(v)) return NULL;
    if (r->number == TEXT_UTF8) return PyUnicode_AsUTF8AndSize(v, n);
    if (!PyUnicode_IS_ASCII(v)) return NULL;
    *n = PyUnicode_GET_LENGTH(v);
    const char *p = (const char *)PyUnicode_1BYTE_DATA(v);
    return memchr(p, 0, (size_t)*n) == NULL ? p : NULL;
}

/* Whether `v` fits an integer of `width` bytes, signed or not as `flags` say. */
static int fits_int(Py_ssize_t v, int width, int flags) {
    int bits = width * 8 - ((flags & F_SIGNED) ? 1 : 0);
    return v >= 0 && (bits >= 63 || (unsigned long long)v >> bits == 0);
}

/* The `size` bytes at o->data[start:] are a message: put row `r`'s length prefix before them. */
static int insert_length_prefix(const Row *r, Out *o, Py_ssize_t start, Py_ssize_t size) {
    unsigned char prefix[10];
    int k = 0;
    if (r->flags & F_VARINT) {
        unsigned long long v = (unsigned long long)size;
        while (v >= 0x80) {
            prefix[k++] = (unsigned char)(v | 0x80);
            v >>= 7;
        }
        prefix[k++] = (unsigned char)v;
    } else {
        if (!size_fits(r, size)) return -1;
        write_uint(prefix, (unsigned long long)size, r->width, r->flags & F_BIG);
        k = r->width;
    }
    if (out_reserve(o, k) < 0) return -1;
    memmove(o->data + start + k, o->data + start, (size_t)size);
    memcpy(o->data + start, prefix, (size_t)k);
    o->len += k;
    return 0;
}

/* Append the message `v` of a proto_prefixed row, its length first: written by the protobuf
   codec in place, or by its encode method. */
static int encode_proto_prefixed(const Row *r, PyObject *v, Out *o) {
    Py_ssize_t start = o->len;
    if (v == NULL) return -1;
    if (wire_api != NULL) {
        if (wire_api->encode_into(v, o) == 0) return insert_length_prefix(r, o, start,
                                                                          o->len - start);
        if (PyErr_Occurred()) return -1;
        o->len = start;
    }
    PyObject *b = PyObject_CallMethodNoArgs(v, str_encode);
    if (b == NULL) return -1;
    int rc = PyBytes_CheckExact(b) ? out_write(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
                                   : -1;
    Py_DECREF(b);
    return rc < 0 ? -1 : insert_length_prefix(r, o, start, o->len - start);
}

/* Append the nested struct `v` of a blocks row cut in blocks: it is written after room for the
   count and the first block's length, then the later blocks are moved up (the last first) to
   make room for their lengths. */
static int encode_blocks(const Row *r, PyObject *v, Out *o, int depth) {
    Py_ssize_t start = o->len, lw = r->len_width, bs = r->block_size;
    Py_ssize_t c0 = start + r->width + lw;
    if (v == NULL || out_reserve(o, r->width + lw) < 0) return -1;
    o->len = c0;
    if (Py_TYPE(r->obj) == &FrameCodec_Type) {
        if (encode_struct((FrameCodecObject *)r->obj, v, o, depth + 1) < 0) return -1;
    } else {
        PyObject *b = PyObject_CallMethodNoArgs(v, str_encode);
        if (b == NULL) return -1;
        int rc = PyBytes_CheckExact(b) ? out_write(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
                                       : -1;
        Py_DECREF(b);
        if (rc < 0) return -1;
    }
    Py_ssize_t size = o->len - c0, count = size / bs + (size % bs != 0);
    if ((r->max_blocks >= 0 && count > r->max_blocks) || !fits_int(count, r->width, r->flags)
            || !fits_int(count > 1 ? bs : size, lw, r->len_flags))
        return -1;
    if (count == 0) {
        o->len = start + r->width;
    } else {
        if (out_reserve(o, (count - 1) * lw) < 0) return -1;
        unsigned char *d = (unsigned char *)o->data;
        for (Py_ssize_t j = count - 1; j >= 1; j--)
            memmove(d + c0 + j * (bs + lw), d + c0 + j * bs,
                    (size_t)(j == count - 1 ? size - j * bs : bs));
        for (Py_ssize_t j = 0; j < count; j++)
            write_uint(d + c0 + j * (bs + lw) - lw,
                       (unsigned long long)(j == count - 1 ? size - j * bs : bs), (int)lw,
                       r->len_flags & F_BIG);
        o->len = c0 + size + (count - 1) * lw;
    }
    write_uint((unsigned char *)o->data + start, (unsigned long long)count, r->width,
               r->flags & F_BIG);
    return 0;
}

/* Append TubeMQ's guarded row `r` of codec `c` for `obj`: its value when the condition holds,
   nothing when not (the value must then be None, as the Python code says). */
static int encode_guarded_row(FrameCodecObject *c, const Row *r, PyObject *obj, Out *o,
                              int depth) {
    int holds = condition_holds(c, r, NULL, obj);
    PyObject *v = slot(obj, r->offset);
    if (holds < 0) return -1;
    if (!holds) return v == Py_None ? 0 : -1;
    if (v == NULL || v == Py_None) return -1;
    if (r->op == OP_STRUCT_WHEN) return encode_struct((FrameCodecObject *)r->obj, v, o, depth + 1);
    return encode_proto_prefixed(r, v, o);
}

/* Append Pravega's table-entry rows for `obj`: a len_value's constant plus its bytes' length,
   an int_when's integer when its condition holds (None when not). 0, or -1 to give up. */
static int encode_pravega_row(FrameCodecObject *c, const Row *r, PyObject *obj, Out *o) {
    unsigned long long raw;
    if (r->op == OP_LEN_VALUE) {
        PyObject *v = slot(obj, c->rows[r->index].offset);
        if (v == NULL || !PyBytes_CheckExact(v)) return -1;
        PyObject *n = PyLong_FromLongLong((long long)r->number + (long long)PyBytes_GET_SIZE(v));
        if (n == NULL) return -1;
        int ok = int_raw(n, r->width, r->flags, &raw);
        Py_DECREF(n);
        return ok ? out_uint(o, raw, r->width, r->flags) : -1;
    }
    int holds = condition_holds(c, r, NULL, obj);
    PyObject *v = slot(obj, r->offset);
    if (holds < 0) return -1;
    if (!holds) return v == Py_None ? 0 : -1;  /* the Python code says it must be None */
    if (!int_raw(v, r->width, r->flags, &raw)) return -1;
    return out_uint(o, raw, r->width, r->flags);
}

/* Append Pravega's optional tail row `r` for the value `v`: nothing for a prefixed_optional's
   None, else its length and bytes; a default_bool's byte (a real bool only). */
static int encode_optional_row(const Row *r, PyObject *v, Out *o) {
    if (r->op == OP_DEFAULT_BOOL) {
        if ((v != Py_True && v != Py_False) || out_reserve(o, 1) < 0) return -1;
        o->data[o->len++] = v == Py_True ? 1 : 0;
        return 0;
    }
    if (v == Py_None) return 0;
    Py_ssize_t len;
    const char *p = prefixed_bytes(r, v, &len);
    if (p == NULL) return -1;
    if (r->flags & F_VARINT) {
        if (out_varint(o, (unsigned long long)len) < 0) return -1;
    } else if (!size_fits(r, len) || out_uint(o, (unsigned long long)len, r->width, r->flags) < 0) {
        return -1;
    }
    return out_write(o, p, len);
}

/* Append lenenc row `r` for value `v`: NULL (0xfb) for None when the row is nullable, else
   the length in its shortest form and the bytes. 0, or -1 to give up. */
static int encode_lenenc(const Row *r, PyObject *v, Out *o) {
    if (v == Py_None && r->flags & F_NULLABLE) return out_write(o, "\xfb", 1);
    Py_ssize_t len;
    const char *p = prefixed_bytes(r, v, &len);
    if (p == NULL || out_reserve(o, 9) < 0) return -1;
    unsigned char *q = (unsigned char *)o->data + o->len;
    unsigned long long n = (unsigned long long)len;
    int width = n < 0xfb ? 0 : n < 0x10000 ? 2 : n < 0x1000000 ? 3 : 8;
    if (width == 0) {
        q[0] = (unsigned char)n;
    } else {
        q[0] = (unsigned char)(width == 2 ? 0xfc : width == 3 ? 0xfd : 0xfe);
        write_uint(q + 1, n, width, 0);
    }
    o->len += 1 + width;
    return out_write(o, p, len);
}

/* Append masked_bytes row `r`: its value's bytes XOR-ed with its key's (sent as they are when
   the key may be None and is). Its size, if any, was written by its size row, or is an integer
   row the Python code writes as it is: the bytes are written whatever their length, as there.
   0, or -1 to give up. */
static int encode_masked(FrameCodecObject *c, const Row *r, PyObject *obj, Out *o) {
    PyObject *v = slot(obj, r->offset);
    unsigned char buf[8];
    const unsigned char *key = NULL;
    if (v == NULL || !PyBytes_CheckExact(v)) return -1;
    Py_ssize_t klen = mask_key(r, slot(obj, c->rows[r->number].offset), buf, &key);
    if (klen < 0) return -1;
    Py_ssize_t n = PyBytes_GET_SIZE(v);
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(v);
    if (klen == 0) return out_write(o, (const char *)p, n);
    if (out_reserve(o, n) < 0) return -1;
    mask_into((unsigned char *)o->data + o->len, p, n, key, klen);
    o->len += n;
    return 0;
}

/* Append a terminated row: its value's bytes, then the terminator. -1 to give up on a value
   that is not plain or would be read back shorter: one holding the terminator, or (a longer
   terminator) ending with its start, where value + terminator holds it sooner. */
static int encode_terminated(const Row *r, PyObject *v, Out *o) {
    Py_ssize_t n, tlen = PyBytes_GET_SIZE(r->obj);
    const char *p = prefixed_bytes(r, v, &n), *t = PyBytes_AS_STRING(r->obj);
    if (p == NULL) return -1;
    if (find_bytes((const unsigned char *)p, n, t, tlen) >= 0) return -1;
    for (Py_ssize_t k = n - tlen + 1 > 0 ? n - tlen + 1 : 0; k < n; k++) {
        Py_ssize_t m = n - k;  /* < tlen: the value's tail, then the terminator's head */
        if (memcmp(p + k, t, (size_t)m) == 0 && memcmp(t, t + m, (size_t)(tlen - m)) == 0)
            return -1;
    }
    if (out_write(o, p, n) < 0) return -1;
    return out_write(o, t, tlen);
}

/* Append `v` as a length-encoded integer in its shortest form. */
static int out_lenenc_int(Out *o, unsigned long long n) {
    if (out_reserve(o, 9) < 0) return -1;
    unsigned char *q = (unsigned char *)o->data + o->len;
    int width = n < 0xfb ? 0 : n < 0x10000 ? 2 : n < 0x1000000 ? 3 : 8;
    if (width == 0) {
        q[0] = (unsigned char)n;
    } else {
        q[0] = (unsigned char)(width == 2 ? 0xfc : width == 3 ? 0xfd : 0xfe);
        write_uint(q + 1, n, width, 0);
    }
    o->len += 1 + width;
    return 0;
}

/* Append an int_range or lenenc_int row: 0, or -1 to give up on a value out of its range, not
   an int, or (lenenc_int) None where it may not be. */
static int encode_ranged_int(const Row *r, PyObject *v, Out *o) {
    unsigned long long raw;
    if (r->op == OP_LENENC_INT) {
        if (r->flags & F_LENENC_CONST) return out_lenenc_int(o, r->number);
        if (v == Py_None && r->flags & F_NULLABLE) return out_write(o, "\xfb", 1);
        if (!int_raw(v, 8, 0, &raw)) return -1;
        return out_lenenc_int(o, raw);
    }
    if (r->flags & F_VARINT) {
        if (!int_raw(v, 8, 0, &raw) || !in_range(r, raw)) return -1;
        return out_varint(o, raw);
    }
    if (!int_raw(v, r->width, r->flags, &raw) || !in_range(r, raw)) return -1;
    return out_uint(o, raw, r->width, r->flags);
}

/* Append row `r` (one of the rows after OP_STRUCT) of codec `c` for `obj`: 0, or -1 to give
   up. counts[] holds what each count_of row wrote. */
/* A struct_run row's list of nested structs, one after another. */
static int encode_run(const Row *r, PyObject *v, Out *o, int depth) {
    if (v == NULL || !PyList_CheckExact(v)) return -1;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(v); k++) {
        PyObject *item = Py_NewRef(PyList_GET_ITEM(v, k));
        int rc = encode_struct((FrameCodecObject *)r->obj, item, o, depth + 1);
        Py_DECREF(item);
        if (rc < 0) return -1;
    }
    return 0;
}

static NOINLINE int encode_row(FrameCodecObject *c, const Row *r, PyObject *obj, Out *o,
                               Py_ssize_t *counts, int depth) {
    Py_ssize_t i = r - c->rows;
    switch (r->op) {
        case OP_UUID: {
            if (out_reserve(o, 16) < 0) return -1;
            if (uuid_bytes(r, slot(obj, r->offset), (unsigned char *)o->data + o->len) < 0)
                return -1;
            o->len += 16;
            break;
        }
        case OP_SWITCH_KEY: {
            const Row *t = &c->rows[r->index];
            PyObject *found = switch_case(t, slot(obj, t->offset));
            unsigned long long raw;
            if (found == NULL || !int_raw(PyTuple_GET_ITEM(found, 0), r->width, r->flags, &raw))
                return -1;
            if (out_uint(o, raw, r->width, r->flags) < 0) return -1;
            break;
        }
        case OP_SWITCH:  /* not sized (a sized one is written by its size row) */
            if (encode_switch_body(r, slot(obj, r->offset), o, depth) < 0) return -1;
            break;
        case OP_STRUCT_RUN:  /* not sized (a sized one is written by its size row) */
            if (encode_run(r, slot(obj, r->offset), o, depth) < 0) return -1;
            break;
        case OP_INT_ARRAY: {
            PyObject *v = slot(obj, r->offset);
            /* The count written before it (or its program's) must still be its length. */
            if (v == NULL || !PyList_CheckExact(v)
                    || PyList_GET_SIZE(v) != array_count(c, r, NULL, obj, counts))
                return -1;
            for (Py_ssize_t k = 0; k < PyList_GET_SIZE(v); k++) {
                unsigned long long raw;
                if (!int_raw(PyList_GET_ITEM(v, k), r->width, r->flags, &raw)
                        || out_uint(o, raw, r->width, r->flags) < 0)
                    return -1;
            }
            break;
        }
        case OP_FLOAT: {
            /* An exact float or int, as struct's "f" and "d" formats pack it; anything else,
               or a number an f32 cannot hold, is the Python code's to refuse. */
            PyObject *v = slot(obj, r->offset);
            double d;
            if (v != NULL && PyFloat_CheckExact(v)) {
                d = PyFloat_AS_DOUBLE(v);
            } else if (v != NULL && PyLong_CheckExact(v)) {
                d = PyLong_AsDouble(v);
                if (d == -1.0 && PyErr_Occurred()) return -1;
            } else {
                return -1;
            }
            if (out_reserve(o, r->width) < 0) return -1;
            char *p = o->data + o->len;
            int le = !(r->flags & F_BIG);
            if ((r->width == 4 ? PyFloat_Pack4(d, p, le) : PyFloat_Pack8(d, p, le)) < 0)
                return -1;
            o->len += r->width;
            break;
        }
        case OP_PREFIXED: {
            Py_ssize_t len;
            const char *p = prefixed_bytes(r, slot(obj, r->offset), &len);
            if (p == NULL) return -1;
            if (r->flags & F_VARINT) {
                if (out_varint(o, (unsigned long long)len) < 0) return -1;
            } else if (!size_fits(r, len)
                       || out_uint(o, (unsigned long long)len, r->width, r->flags) < 0) {
                return -1;
            }
            if (out_write(o, p, len) < 0) return -1;
            break;
        }
        case OP_SKIP_TRAILING:
            break;
        case OP_VARINT: {
            unsigned long long raw;
            if (!int_raw(slot(obj, r->offset), 8, 0, &raw) || out_varint(o, raw) < 0) return -1;
            break;
        }
        case OP_BOOL: {
            PyObject *v = slot(obj, r->offset);
            if ((v != Py_True && v != Py_False) || out_reserve(o, 1) < 0) return -1;
            o->data[o->len++] = v == Py_True ? 1 : 0;
            break;
        }
        case OP_CONDITION: {
            int holds = condition_holds(c, r, NULL, obj);
            PyObject *v = slot(obj, r->offset);
            unsigned long long raw;
            if (holds < 0) return -1;
            if (!holds) {
                if (v != Py_None) return -1;  /* the Python code says it must be None */
                break;
            }
            if (!int_raw(v, r->width, r->flags, &raw) || out_uint(o, raw, r->width, r->flags) < 0)
                return -1;
            break;
        }
        case OP_COUNT_OF: {
            PyObject *v = slot(obj, c->rows[r->index].offset);
            if (v == NULL || !PyList_CheckExact(v) || !size_fits(r, PyList_GET_SIZE(v)))
                return -1;
            counts[i] = PyList_GET_SIZE(v);
            if (out_uint(o, (unsigned long long)counts[i], r->width, r->flags) < 0) return -1;
            break;
        }
        case OP_STRUCT_ARRAY: {
            PyObject *v = slot(obj, r->offset);
            if (v == NULL || !PyList_CheckExact(v)) return -1;
            for (Py_ssize_t k = 0; k < PyList_GET_SIZE(v); k++) {
                PyObject *item = Py_NewRef(PyList_GET_ITEM(v, k));
                int rc = encode_struct((FrameCodecObject *)r->obj, item, o, depth + 1);
                Py_DECREF(item);
                if (rc < 0) return -1;
            }
            /* The count written before it (or its program's) must still be its length. */
            if (PyList_GET_SIZE(v) != array_count(c, r, NULL, obj, counts)) return -1;
            break;
        }
        case OP_BLOCKS:
            if (encode_blocks(r, slot(obj, r->offset), o, depth) < 0) return -1;
            break;
        case OP_PROTO_PREFIXED:
            if (encode_proto_prefixed(r, slot(obj, r->offset), o) < 0) return -1;
            break;
        case OP_STRUCT_WHEN: case OP_PROTO_PREFIXED_WHEN:
            if (encode_guarded_row(c, r, obj, o, depth) < 0) return -1;
            break;
        case OP_LEN_VALUE: case OP_INT_WHEN:
            if (encode_pravega_row(c, r, obj, o) < 0) return -1;
            break;
        case OP_PREFIXED_OPTIONAL: case OP_DEFAULT_BOOL:
            if (encode_optional_row(r, slot(obj, r->offset), o) < 0) return -1;
            break;
        case OP_MESSAGE_BYTES: {  /* its size went into the message before anything */
            PyObject *v = slot(obj, r->offset);
            if (v == NULL || !PyBytes_CheckExact(v)
                    || out_write(o, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v)) < 0)
                return -1;
            break;
        }
        case OP_LENENC:
            if (encode_lenenc(r, slot(obj, r->offset), o) < 0) return -1;
            break;
        case OP_CONST_BYTES:
            if (out_write(o, PyBytes_AS_STRING(r->obj), PyBytes_GET_SIZE(r->obj)) < 0) return -1;
            break;
        case OP_STRUCT_RUN_WHEN: {
            int holds = condition_holds(c, r, NULL, obj);
            PyObject *v = slot(obj, r->offset);
            if (holds < 0) return -1;
            if (!holds) {
                if (v != Py_None) return -1;  /* the Python code says it must be None */
                break;
            }
            if (v == NULL || !PyList_CheckExact(v)) return -1;
            for (Py_ssize_t k = 0; k < PyList_GET_SIZE(v); k++) {
                PyObject *item = Py_NewRef(PyList_GET_ITEM(v, k));
                int rc = encode_struct((FrameCodecObject *)r->obj, item, o, depth + 1);
                Py_DECREF(item);
                if (rc < 0) return -1;
            }
            break;
        }
        case OP_MASKED_BYTES:
            if (encode_masked(c, r, obj, o) < 0) return -1;
            break;
        case OP_REQUIRES:  /* the Python code raises the rule's error */
            if (rule_holds(c, r, NULL, obj) != 1) return -1;
            break;
        case OP_TERMINATED:
            if (encode_terminated(r, slot(obj, r->offset), o) < 0) return -1;
            break;
        case OP_INT_RANGE: case OP_LENENC_INT:
            if (encode_ranged_int(r, r->offset >= 0 ? slot(obj, r->offset) : NULL, o) < 0)
                return -1;
            break;
        case OP_LENENC_OPTIONAL: {
            PyObject *v = slot(obj, r->offset);
            if (v != Py_None && encode_lenenc(r, v, o) < 0) return -1;
            break;
        }
        case OP_DELIMITED:  /* written at the end (encode_struct_p) */
            break;
        case OP_FIXED: case OP_TEXT_REST: {
            Py_ssize_t len;
            const char *p = prefixed_bytes(r, slot(obj, r->offset), &len);
            if (p == NULL || (r->op == OP_FIXED && len != r->index)) return -1;
            if (out_write(o, p, len) < 0) return -1;
            break;
        }
        default:
            return -1;
    }
    return 0;
}

/* Write the integer `v` of a value or size_of_struct row: 0, or -1 if it does not fit. */
static int write_row_int(const Row *r, long long v, Out *o) {
    if (r->flags & F_VARINT) return v < 0 ? -1 : out_varint(o, (unsigned long long)v);
    int bits = r->width * 8;
    if (r->flags & F_SIGNED) {
        if (bits < 64 && (v < -(1LL << (bits - 1)) || v >= (1LL << (bits - 1)))) return -1;
    } else if (v < 0 || (bits < 64 && (unsigned long long)v >> bits)) {
        return -1;
    }
    unsigned long long raw = (unsigned long long)v & (bits < 64 ? (1ULL << bits) - 1 : ~0ULL);
    return out_uint(o, raw, r->width, r->flags);
}

/* Append a bits row, packed from its bit_field rows (right after it): a stored part is a
   bool, or an int (or a member of the part's enum) that fits its bits; a part with a value
   program gets what that gives, kept in computed[] for the programs after it. A derived key
   (set in computed[] before anything, from the switch body's type) must be what its program
   gives from the rows before it. */
static NOINLINE int encode_bits_row(FrameCodecObject *c, const Row *r, PyObject *obj, Out *o,
                                    long long *computed, const long long *params) {
    Py_ssize_t i = r - c->rows;
    Env e = {c, NULL, obj, computed, params, 0};
    long long v;
    switch (r->op) {
        case OP_BITS: {
            unsigned long long raw = 0;
            for (Py_ssize_t j = i + 1; j <= i + r->index; j++) {
                const Row *t = &c->rows[j];
                if (t->prog != NULL) {
                    if (run_prog1(t->prog, t->prog_len, &e, &v) < 0) return -1;
                    computed[j] = v;
                } else {
                    PyObject *held = slot(obj, t->offset);
                    if (held == NULL) return -1;
                    if (t->flags & F_EXTRA) {
                        if (!PyBool_Check(held)) return -1;
                        v = held == Py_True;
                    } else if (!(PyLong_CheckExact(held)
                                 || (t->obj != NULL
                                     && Py_TYPE(held) == (PyTypeObject *)t->dispatch_attr))
                               || !operand_any(held, &v)) {
                        return -1;
                    }
                }
                if (v < 0 || (t->width < 63 && v >= (1LL << t->width))) return -1;
                raw |= (unsigned long long)v << t->number;
            }
            return out_uint(o, raw, r->width, r->flags);
        }
        case OP_BIT_FIELD:
            return 0;  /* its bits went out with its bits row */
        case OP_DERIVED_KEY:
            if (run_prog(r->prog, r->prog_len, &e, &v, 1) < 0 || v != computed[i]) return -1;
            return 0;
    }
    return -1;
}

/* Put each derived key's value, found from its switch body's type, in computed[]. */
static NOINLINE int set_derived_keys(FrameCodecObject *c, PyObject *obj, long long *computed) {
    for (Py_ssize_t i = 0; i < c->nrows; i++) {
        const Row *r = &c->rows[i];
        if (r->op != OP_DERIVED_KEY) continue;
        const Row *t = &c->rows[r->index];
        PyObject *found = switch_case(t, slot(obj, t->offset));
        if (found == NULL || !operand(PyTuple_GET_ITEM(found, 0), &computed[i])) return -1;
    }
    return 0;
}

/* Append TANK's row `r` as encode_row does; 1 when it is a guard that does not hold (the row
   it guards is left out: the caller steps over it). computed[] holds what each value row
   wrote, encoded[] the bytes of each struct_sized row, made at its size row. */
static NOINLINE int encode_tank_row(FrameCodecObject *c, const Row *r, PyObject *obj, Out *o,
                                    Py_ssize_t *counts, PyObject **encoded,
                                    long long *computed, int depth, const long long *params) {
    Py_ssize_t i = r - c->rows;
    Env e = {c, NULL, obj, computed, params, 0};
    long long v;
    switch (r->op) {
        case OP_GUARD: {
            if (run_prog1(r->prog, r->prog_len, &e, &v) < 0) return -1;
            if (v) return 0;
            const Row *t = r + 1;
            if (t->offset >= 0) {
                /* The Python code says a field left out must be None. */
                if (slot(obj, t->offset) != Py_None) return -1;
            } else {
                computed[i + 1] = 0;
            }
            return 1;
        }
        case OP_VALUE:
            if (run_prog(r->prog, r->prog_len, &e, &v, 1) < 0 || write_row_int(r, v, o) < 0)
                return -1;
            computed[i] = v;
            break;
        case OP_DERIVE: {
            /* The value held must be what the program gives (the Python code checks it). */
            long long held;
            if (r->offset < 0) {
                /* Not stored (a size): nothing to check, its value kept for the programs. */
                if (run_prog(r->prog, r->prog_len, &e, &v, 1) < 0) return -1;
                computed[i] = v;
                break;
            }
            if (run_prog(r->prog, r->prog_len, &e, &v, 1) < 0
                    || !operand(slot(obj, r->offset), &held))
                return -1;
            if (held != (r->flags & F_EXTRA ? v != 0 : v)) return -1;
            break;
        }
        case OP_STRUCT_ARGS: {
            long long args[EXPR_MAX_DEPTH];
            if (run_prog(r->prog, r->prog_len, &e, args, (int)r->number) < 0) return -1;
            return encode_struct_p((FrameCodecObject *)r->obj, slot(obj, r->offset), o,
                                   depth + 1, args);
        }
        case OP_ARRAY_ARGS: {
            PyObject *list = slot(obj, r->offset);
            if (list == NULL || !PyList_CheckExact(list)) return -1;
            /* Its length must be the count: its count_of row's, the param's, or the stored
               integer's (the Python code raises when it is not). */
            long long count = r->index < 0 ? (params == NULL ? -1 : params[r->width])
                              : r->flags & F_EXTRA ? -1 : (long long)counts[r->index];
            if (r->flags & F_EXTRA
                    && !small_operand(slot(obj, c->rows[r->index].offset), &count))
                return -1;
            if (PyList_GET_SIZE(list) != count) return -1;
            for (e.index = 0; e.index < PyList_GET_SIZE(list); e.index++) {
                long long args[EXPR_MAX_DEPTH];
                if (run_prog(r->prog, r->prog_len, &e, args, (int)r->number) < 0) return -1;
                PyObject *item = Py_NewRef(PyList_GET_ITEM(list, e.index));
                int rc = encode_struct_p((FrameCodecObject *)r->obj, item, o, depth + 1, args);
                Py_DECREF(item);
                if (rc < 0) return -1;
            }
            break;
        }
        case OP_SIZE_OF_STRUCT: {
            /* The struct comes later (after other rows): encoded now, as the Python code does,
               and kept for its row. */
            const Row *t = &c->rows[r->index];
            Out tmp;
            out_init(&tmp);
            int rc = encode_struct_p((FrameCodecObject *)t->obj, slot(obj, t->offset), &tmp,
                                     depth + 1, NULL);
            PyObject *b = rc < 0 ? NULL : PyBytes_FromStringAndSize(tmp.data, tmp.len);
            out_free(&tmp);
            if (b == NULL) return -1;
            encoded[r->index] = b;
            if (write_row_int(r, (long long)PyBytes_GET_SIZE(b), o) < 0) return -1;
            break;
        }
        case OP_MARKER: {
            /* Written when True; a value other than a bool is the Python code's. */
            PyObject *v = slot(obj, r->offset);
            if (v == Py_True) return out_uint(o, r->number, r->width, r->flags) < 0 ? -1 : 0;
            return v == Py_False ? 0 : -1;
        }
        case OP_STRUCT_SIZED: {
            PyObject *b = encoded[i];
            if (b == NULL || out_write(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b)) < 0)
                return -1;
            break;
        }
        default:
            return -1;
    }
    return 0;
}

/* What the Python encoder does first: each message_bytes row's length goes into the size
   slot of its message. 0, or -1 to give up before anything is set when a value is not plain
   (bytes, and a message of exactly the row's class); the Python code then sets the same
   sizes itself, and raises where it must. */
static NOINLINE int set_message_sizes(FrameCodecObject *c, PyObject *obj) {
    for (int pass = 0; pass < 2; pass++) {
        for (Py_ssize_t i = 0; i < c->nrows; i++) {
            const Row *r = &c->rows[i];
            if (r->op != OP_MESSAGE_BYTES) continue;
            PyObject *v = slot(obj, r->offset), *msg = slot(obj, c->rows[r->index].offset);
            if (pass == 0) {
                if (v == NULL || !PyBytes_CheckExact(v) || msg == NULL
                        || Py_TYPE(msg) != (PyTypeObject *)c->rows[r->index].obj)
                    return -1;
                continue;
            }
            PyObject *size = PyLong_FromSsize_t(PyBytes_GET_SIZE(v));
            if (size == NULL) return -1;
            PyObject **at = (PyObject **)((char *)msg + r->size_offset);
            Py_XSETREF(*at, size);
        }
    }
    return 0;
}

/* A size_range row: room for its size; its end row: the size of what the rows between
   wrote, filled in (a size its integer cannot hold is the Python code's error). */
static NOINLINE int encode_range_row(FrameCodecObject *c, const Row *r, Out *o,
                                     const Py_ssize_t *at) {
    if (r->op == OP_SIZE_RANGE) return out_uint(o, 0, r->width, r->flags);
    const Row *sr = &c->rows[r->index];
    Py_ssize_t start = at[r->index] + sr->width, size = o->len - start;
    if (!size_fits(sr, size)) return -1;
    write_uint((unsigned char *)o->data + at[r->index], (unsigned long long)size, sr->width,
               sr->flags & F_BIG);
    return 0;
}

/* Append codec's struct `obj` to `o`. 0 on success, -1 to give up. */
static int encode_struct_p(FrameCodecObject *c, PyObject *obj, Out *o, int depth,
                           const long long *params) {
    Py_ssize_t i, n = c->nrows;
    Py_ssize_t at[FRAME_MAX_ROWS];       /* where each row's bytes start */
    PyObject *encoded[FRAME_MAX_ROWS];   /* protobuf bytes, made when their size field is reached */
    Py_ssize_t counts[FRAME_MAX_ROWS];   /* what each count_of row wrote */
    long long computed[FRAME_MAX_ROWS];  /* what each value row wrote */
    int rc = -1;
    if (depth > MAX_DEPTH || obj == NULL || Py_TYPE(obj) != c->cls
            || (c->nparams > 0 && params == NULL))
        return -1;
    if (c->enc_keeps)
        for (i = 0; i < n; i++) encoded[i] = NULL;
    if (c->has_message_sizes && set_message_sizes(c, obj) < 0) return -1;
    if (c->has_derived_key && set_derived_keys(c, obj, computed) < 0) return -1;
    for (i = 0; i < n; i++) {
        const Row *r = &c->rows[i];
        at[i] = o->len;
        switch (r->op) {
        case OP_INT: case OP_DEFAULT: {
            unsigned long long raw;
            if (!int_raw(slot(obj, r->offset), r->width, r->flags, &raw)) goto done;
            if (out_uint(o, raw, r->width, r->flags) < 0) goto done;
            break;
        }
        case OP_CONST:
            if (out_uint(o, r->number, r->width, r->flags) < 0) goto done;
            break;
        case OP_SIZE: {
            /* The measured field comes later; encode it now, as the Python code does. */
            const Row *t = &c->rows[r->index];
            PyObject *v = slot(obj, t->offset);
            if (v == NULL) goto done;  /* a slot left empty: the Python code raises */
            if (t->op == OP_SWITCH || t->op == OP_STRUCT_RUN) {
                /* Right after its size (check_row): written in place, measured, filled in. */
                if (out_uint(o, 0, r->width, r->flags) < 0) goto done;
                Py_ssize_t start = o->len;
                if ((t->op == OP_SWITCH ? encode_switch_body(t, v, o, depth)
                                        : encode_run(t, v, o, depth)) < 0)
                    goto done;
                Py_ssize_t size = o->len - start;
                if (!size_fits(r, size)) goto done;
                write_uint((unsigned char *)o->data + at[i], (unsigned long long)size, r->width,
                           r->flags & F_BIG);
                at[++i] = start;
                break;
            }
            if (t->op == OP_PROTO && r->index == i + 1 && wire_api != NULL) {
                /* The message comes right after its size: written in place by the protobuf
                   codec, then measured; the size is filled in and the message's row done. */
                if (out_uint(o, 0, r->width, r->flags) < 0) goto done;
                Py_ssize_t start = o->len;
                if (wire_api->encode_into(v, o) == 0) {
                    Py_ssize_t size = o->len - start;
                    if (!size_fits(r, size)) goto done;
                    write_uint((unsigned char *)o->data + at[i], (unsigned long long)size,
                               r->width, r->flags & F_BIG);
                    at[++i] = start;
                    break;
                }
                if (PyErr_Occurred()) goto done;
                o->len = at[i];  /* not for the compiled codec: through its encode method */
            }
            if (t->op == OP_PROTO) {
                v = PyObject_CallMethodNoArgs(v, str_encode);
                if (v == NULL) goto done;
                encoded[r->index] = v;
                if (!PyBytes_CheckExact(v)) goto done;
            } else if (!PyBytes_CheckExact(v)) {
                goto done;
            }
            if (!size_fits(r, PyBytes_GET_SIZE(v))) goto done;
            if (out_uint(o, (unsigned long long)PyBytes_GET_SIZE(v), r->width, r->flags) < 0)
                goto done;
            break;
        }
        case OP_SIZE_REST: case OP_CHECKSUM:
            if (out_uint(o, 0, r->width, r->flags) < 0) goto done;  /* filled in at the end */
            break;
        case OP_PROTO: case OP_BYTES: {
            PyObject *v = r->op == OP_PROTO ? encoded[i] : slot(obj, r->offset);
            if (v == NULL || !PyBytes_CheckExact(v)) goto done;
            if (out_write(o, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v)) < 0) goto done;
            break;
        }
        case OP_SIZE_RANGE: case OP_SIZE_RANGE_END:
            if (encode_range_row(c, r, o, at) < 0) goto done;
            break;
        case OP_STRUCT: {
            PyObject *v = slot(obj, r->offset);
            if (v == Py_None && r->index != PRESENT_ALWAYS) break;
            if (encode_struct((FrameCodecObject *)r->obj, v, o, depth + 1) < 0) goto done;
            break;
        }
        case OP_BIT_FIELD:
            break;  /* its bits went out with its bits row (encode_bits_row) */
        case OP_GUARD:
            /* A guard reading a bit field its bits row computed (AMQP's property flags), in
               line: when it holds its row comes next; when not, its stored row must be None
               (as encode_tank_row says) and is left out. Any other goes out of line. */
            if (r->prog_len == 1 && r->prog->op == X_FIELD && c->rows[r->prog->arg].offset < 0) {
                if (computed[r->prog->arg]) break;
                if (r[1].offset >= 0) {
                    if (slot(obj, r[1].offset) != Py_None) goto done;
                    at[++i] = o->len;
                    break;
                }
            }
            /* fall through */
        default: {
            /* The rows issue #21 added, out of line (see decode_row). */
            int got = is_tank_op(r->op)
                ? encode_tank_row(c, r, obj, o, counts, encoded, computed, depth, params)
                : is_bits_op(r->op) ? encode_bits_row(c, r, obj, o, computed, params)
                : encode_row(c, r, obj, o, counts, depth);
            if (got < 0) goto done;
            if (got > 0) at[++i] = o->len;  /* a guard that does not hold: its row left out */
            break;
        }
        }
    }
    if (!c->enc_fills) {
        rc = 0;
        goto done;
    }
    /* Sizes of the rest first, then checksums (which may cover them), as the Python code. */
    for (i = 0; i < n; i++) {
        const Row *r = &c->rows[i];
        if (r->op != OP_SIZE_REST) continue;
        Py_ssize_t size = o->len - at[i] - r->width + (Py_ssize_t)(long long)r->number;
        if (size < 0 || !size_fits(r, size)) goto done;
        write_uint((unsigned char *)o->data + at[i], (unsigned long long)size, r->width,
                   r->flags & F_BIG);
    }
    for (i = 0; i < n; i++) {
        const Row *r = &c->rows[i];
        if (r->op != OP_CHECKSUM) continue;
        Py_ssize_t start = at[i] + r->width;
        PyObject *sum = call_checksum(r->obj, o->data + start, o->len - start);
        if (sum == NULL) goto done;
        unsigned long long raw;
        int ok = int_raw(sum, r->width, r->flags, &raw);
        Py_DECREF(sum);
        if (!ok) goto done;
        write_uint((unsigned char *)o->data + at[i], raw, r->width, r->flags & F_BIG);
    }
    if (c->delimiter != NULL) {
        /* Content holding the delimiter would be read back cut: the Python code's error. */
        const char *d = PyBytes_AS_STRING(c->delimiter);
        Py_ssize_t dlen = PyBytes_GET_SIZE(c->delimiter), start = n ? at[0] : o->len;
        if (find_bytes((const unsigned char *)o->data + start, o->len - start, d, dlen) >= 0
                || out_write(o, d, dlen) < 0)
            goto done;
    }
    rc = 0;
done:
    if (c->enc_keeps)
        for (i = 0; i < n; i++) Py_XDECREF(encoded[i]);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* the codec object: the struct class's encode method, and its decode and decode_from */

static PyObject *codec_encode(FrameCodecObject *c, PyObject *obj) {
    if (Py_TYPE(obj) == c->cls) {
        Out o;
        out_init(&o);
        int rc = encode_struct(c, obj, &o, 0);
        PyObject *result = rc == 0 ? PyBytes_FromStringAndSize(o.data, o.len) : NULL;
        out_free(&o);
        if (result != NULL) return result;
        PyErr_Clear();
    }
    return PyObject_CallOneArg(c->py_encode, obj);
}

static PyObject *codec_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        /* Anything but plain `value.encode()` (the params of a struct that has them) is the
           Python method's business. */
        FrameCodecObject *c = (FrameCodecObject *)self;
        return PyObject_Vectorcall(c->py_encode, args, nargsf, kwnames);
    }
    return codec_encode((FrameCodecObject *)self, args[0]);
}

static PyObject *fallback_decode_from(FrameCodecObject *c, PyObject *cls, PyObject *buf,
                                      PyObject *pos, PyObject *end) {
    PyObject *args[4] = {cls, buf, pos, end};
    return PyObject_Vectorcall(c->py_decode_from, args, 4, NULL);
}

static PyObject *decode_from_impl(FrameCodecObject *c, PyObject *cls, PyObject *const *args) {
    PyObject *buf = args[0];
    if ((PyTypeObject *)cls == c->cls && PyBytes_CheckExact(buf)
            && PyLong_CheckExact(args[1]) && PyLong_CheckExact(args[2])) {
        Py_ssize_t pos = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
        if (PyErr_Occurred()) {
            PyErr_Clear();
        } else if (0 <= pos && pos <= end && end <= PyBytes_GET_SIZE(buf)) {
            PyObject *obj = decode_struct(c, buf, &pos, end, 0);
            if (obj != NULL) {
                PyObject *at = PyLong_FromSsize_t(pos);
                if (at == NULL) {
                    Py_DECREF(obj);
                    return NULL;
                }
                PyObject *result = PyTuple_Pack(2, obj, at);
                Py_DECREF(obj);
                Py_DECREF(at);
                return result;
            }
            PyErr_Clear();
        }
    }
    return fallback_decode_from(c, cls, buf, args[1], args[2]);
}

static PyObject *decode_impl(FrameCodecObject *c, PyObject *cls, PyObject *data) {
    if ((PyTypeObject *)cls == c->cls && PyBytes_CheckExact(data)) {
        Py_ssize_t pos = 0;
        PyObject *obj = decode_struct(c, data, &pos, PyBytes_GET_SIZE(data), 0);
        if (obj != NULL && pos == PyBytes_GET_SIZE(data)) return obj;
        Py_XDECREF(obj);
        PyErr_Clear();
    }
    /* The Python decode converts the argument, checks the length and raises in context. */
    PyObject *args[2] = {cls, data};
    return PyObject_Vectorcall(c->py_decode, args, 2, NULL);
}

static PyObject *codec_decode_from(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "decode_from() takes buf, pos and end");
        return NULL;
    }
    return decode_from_impl((FrameCodecObject *)self, args[0], args + 1);
}

static PyObject *codec_own_decode_from(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode_from() takes buf, pos and end");
        return NULL;
    }
    FrameCodecObject *c = (FrameCodecObject *)self;
    return decode_from_impl(c, (PyObject *)c->cls, args);
}

static PyObject *codec_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode() takes one argument");
        return NULL;
    }
    return decode_impl((FrameCodecObject *)self, args[0], args[1]);
}

static PyObject *codec_own_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "decode() takes one argument");
        return NULL;
    }
    FrameCodecObject *c = (FrameCodecObject *)self;
    return decode_impl(c, (PyObject *)c->cls, args[0]);
}

/* The decode methods of a struct with a switch decoding another struct each way (TANK's
   frame): they take to_server as the Python ones do (after the buffer, or by keyword). */

/* The to_server argument of such a call, whose positional arguments (after cls) are
   args[0:nargs] and whose direction would be the at-th: 0 or 1, or -1 when the arguments are
   anything other than the buffer's, then nothing or a bool (the Python method's to sort). */
static int direction_arg(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                         Py_ssize_t at) {
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *v = Py_False;
    if (nargs < at || nargs > at + 1 || nargs + nkw > at + 1) return -1;
    if (nargs == at + 1) {
        v = args[at];
    } else if (nkw == 1) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "to_server") != 0)
            return -1;
        v = args[at];
    }
    return v == Py_True ? 1 : v == Py_False ? 0 : -1;
}

/* decode(cls, data[, to_server]) or decode_from(cls, buf, pos, end[, to_server]) (`from`),
   args[0] being cls: compiled for well-formed bytes, else the Python method. */
static PyObject *directed_impl(FrameCodecObject *c, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames, int from) {
    Py_ssize_t want = from ? 3 : 1;
    int to_server = direction_arg(args + 1, nargs - 1, kwnames, want);
    if (to_server >= 0 && (PyTypeObject *)args[0] == c->cls && PyBytes_CheckExact(args[1])
            && (!from || (PyLong_CheckExact(args[2]) && PyLong_CheckExact(args[3])))) {
        long long direction[1] = {to_server};
        PyObject *buf = args[1];
        Py_ssize_t pos = 0, end = PyBytes_GET_SIZE(buf);
        if (from) {
            pos = PyLong_AsSsize_t(args[2]);
            end = PyLong_AsSsize_t(args[3]);
            if (PyErr_Occurred()) {
                PyErr_Clear();
                pos = -1;
            }
        }
        if (0 <= pos && pos <= end && end <= PyBytes_GET_SIZE(buf)) {
            PyObject *obj = decode_struct_p(c, buf, &pos, end, 0, direction);
            if (obj != NULL && !from && pos == end) return obj;
            if (obj != NULL && from) {
                PyObject *at = PyLong_FromSsize_t(pos);
                PyObject *result = at == NULL ? NULL : PyTuple_Pack(2, obj, at);
                Py_DECREF(obj);
                Py_XDECREF(at);
                return result;
            }
            Py_XDECREF(obj);
            PyErr_Clear();
        }
    }
    return PyObject_Vectorcall(from ? c->py_decode_from : c->py_decode, args, (size_t)nargs,
                               kwnames);
}

static PyObject *codec_decode_directed(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames) {
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "decode() takes the class first");
        return NULL;
    }
    return directed_impl((FrameCodecObject *)self, args, nargs, kwnames, 0);
}

static PyObject *codec_decode_from_directed(PyObject *self, PyObject *const *args,
                                            Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "decode_from() takes the class first");
        return NULL;
    }
    return directed_impl((FrameCodecObject *)self, args, nargs, kwnames, 1);
}

/* The same on the struct's own class: cls put before the arguments. */
static PyObject *own_directed(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames, int from) {
    FrameCodecObject *c = (FrameCodecObject *)self;
    Py_ssize_t n = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject *small[8], **full = n + 1 <= 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (n + 1));
    if (full == NULL) return PyErr_NoMemory();
    full[0] = (PyObject *)c->cls;
    for (Py_ssize_t k = 0; k < n; k++) full[k + 1] = args[k];
    PyObject *result = directed_impl(c, full, nargs + 1, kwnames, from);
    if (full != small) PyMem_Free(full);
    return result;
}

static PyObject *codec_own_decode_directed(PyObject *self, PyObject *const *args,
                                           Py_ssize_t nargs, PyObject *kwnames) {
    return own_directed(self, args, nargs, kwnames, 0);
}

static PyObject *codec_own_decode_from_directed(PyObject *self, PyObject *const *args,
                                                Py_ssize_t nargs, PyObject *kwnames) {
    return own_directed(self, args, nargs, kwnames, 1);
}

/* ------------------------------------------------------------------------------------------ */
/* the compiled constructor: cls(**kwargs) without running the dataclass __init__
 *
 * The __init__ dataclasses write for a struct with a table only stores its keywords: every
 * stored field's value as given, None for an optional nested struct left out. Storing them
 * here, by slot offset, saves the Python frame and a descriptor call per field. As in
 * runtime/codec/_wirecodec.c it is installed as the class's tp_vectorcall (not inherited, so
 * subclasses keep the ordinary path), and anything else (positional arguments, an unknown or
 * repeated keyword, a missing required one, a class whose __init__, __new__, __setattr__ or
 * slots changed since) goes through type.__call__ and the dataclass __init__, which raises
 * its own errors. */

/* Whether a row left out of the constructor's keywords takes its default (row obj). */
static inline int has_default(const Row *r) {
    return r->op == OP_DEFAULT || (r->op == OP_PREFIXED && r->obj != NULL)
           || r->op == OP_DEFAULT_BOOL || r->op == OP_MARKER;
}

/* Whether a stored row may be left out of the constructor's keywords: an optional nested
   struct, a conditional integer and a guarded row are None, as in the dataclass; a default
   row its default. */
static inline int left_out_ok(const Row *r) {
    return (r->op == OP_STRUCT && r->index != PRESENT_ALWAYS) || r->op == OP_CONDITION
           || r->op == OP_STRUCT_WHEN || r->op == OP_PROTO_PREFIXED_WHEN || r->op == OP_INT_WHEN
           || r->op == OP_PREFIXED_OPTIONAL || has_default(r) || (r->flags & F_GUARDED)
           || r->op == OP_LENENC_OPTIONAL;
}

static int ctor_class_intact(FrameCodecObject *c) {
    PyTypeObject *cls = c->cls;
    if (cls->tp_new != PyBaseObject_Type.tp_new || cls->tp_setattro != PyObject_GenericSetAttr
            || cls->tp_alloc != PyType_GenericAlloc
            || PyType_HasFeature(cls, Py_TPFLAGS_IS_ABSTRACT)
            || _PyType_Lookup(cls, str_init) != c->py_init)
        return 0;
    for (Py_ssize_t i = 0; i < c->nrows; i++)
        if (c->rows[i].offset >= 0 && !slot_intact(cls, c->rows[i].name, c->rows[i].offset))
            return 0;
    return 1;
}

/* The value a stored row left out of the keywords takes: its default, or None. */
static inline PyObject *left_out_value(const Row *r) {
    return has_default(r) ? r->obj : Py_None;
}

/* Keep the row each keyword name of `kwnames` matched (rows_of[j] for the j-th), and the
   stored rows left out (vals[i] NULL), for the next call with the same tuple: a call site's
   keyword names are one constant tuple, and while it is kept its names cannot change. */
static void remember_names(FrameCodecObject *c, PyObject *kwnames, PyObject *const *vals,
                           const short *rows_of, Py_ssize_t nkw) {
    Py_ssize_t nfill = 0;
    for (Py_ssize_t i = 0; i < c->nrows; i++)
        if (c->rows[i].offset >= 0 && vals[i] == NULL) c->kw_fill[nfill++] = (short)i;
    memcpy(c->kw_rows, rows_of, sizeof(short) * (size_t)nkw);
    c->kw_nfill = nfill;
    Py_XSETREF(c->kw_names, Py_NewRef(kwnames));
}

/* cls(**kwargs) with the keyword names of the last call that matched (remember_names). */
static PyObject *ctor_known_names(FrameCodecObject *c, PyObject *const *args, Py_ssize_t nkw) {
    PyObject *obj = new_instance(c);
    if (obj == NULL) return NULL;
    for (Py_ssize_t j = 0; j < nkw; j++)
        *(PyObject **)((char *)obj + c->rows[c->kw_rows[j]].offset) = Py_NewRef(args[j]);
    for (Py_ssize_t k = 0; k < c->kw_nfill; k++) {
        const Row *r = &c->rows[c->kw_fill[k]];
        *(PyObject **)((char *)obj + r->offset) = Py_NewRef(left_out_value(r));
    }
    return obj;
}

static PyObject *ctor_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyTypeObject *cls = (PyTypeObject *)callable;
    if (nargs) return ctor_fallback(callable, args, nargs, kwnames);
    PyObject *found = type_table_get(&ctor_codecs, callable);
    if (found == NULL) return ctor_fallback(callable, args, nargs, kwnames);
    FrameCodecObject *c = (FrameCodecObject *)found;
    Py_ssize_t n = c->nrows;
    if (!c->ctor_on || c->cls != cls || nkw > n)
        return ctor_fallback(callable, args, nargs, kwnames);
    /* A class attribute assignment gives the class a new version tag (never reused), so the
       class is looked over again only after a change. */
    unsigned int version = valid_version_tag(cls);
    if (version == 0 || version != c->ctor_version) {
        if (!ctor_class_intact(c)) return ctor_fallback(callable, args, nargs, kwnames);
        c->ctor_version = valid_version_tag(cls);
    }
    if (kwnames != NULL && kwnames == c->kw_names) return ctor_known_names(c, args, nkw);
    PyObject *vals[FRAME_MAX_ROWS];
    short rows_of[FRAME_MAX_ROWS];
    for (Py_ssize_t i = 0; i < n; i++) vals[i] = NULL;
    Py_ssize_t cursor = 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, j);
        Py_ssize_t i = -1;
        /* Mostly interned keywords in field order: the next stored row, by identity. */
        while (cursor < n && c->rows[cursor].offset < 0) cursor++;
        if (cursor < n && c->rows[cursor].name == name) {
            i = cursor;
        } else {
            /* Out of order (an optional field left out): by identity, then by equality. */
            for (Py_ssize_t k = 0; k < n && i < 0; k++)
                if (c->rows[k].offset >= 0 && c->rows[k].name == name) i = k;
            if (i < 0 && !PyUnicode_CheckExact(name))
                return ctor_fallback(callable, args, nargs, kwnames);
            for (Py_ssize_t k = 0; k < n && i < 0; k++)
                if (c->rows[k].offset >= 0 && PyUnicode_Compare(c->rows[k].name, name) == 0)
                    i = k;
            if (PyErr_Occurred()) return NULL;
        }
        if (i < 0 || vals[i] != NULL) return ctor_fallback(callable, args, nargs, kwnames);
        vals[i] = args[j];
        rows_of[j] = (short)i;
        cursor = i + 1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const Row *r = &c->rows[i];
        if (r->offset >= 0 && vals[i] == NULL && !left_out_ok(r))
            return ctor_fallback(callable, args, nargs, kwnames);
    }
    if (kwnames != NULL) remember_names(c, kwnames, vals, rows_of, nkw);
    PyObject *obj = new_instance(c);
    if (obj == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (c->rows[i].offset >= 0)
            *(PyObject **)((char *)obj + c->rows[i].offset) =
                Py_NewRef(vals[i] ? vals[i] : has_default(&c->rows[i]) ? c->rows[i].obj
                                                                        : Py_None);
    return obj;
}

/* install_constructor(init): make cls(**kwargs) the compiled constructor while `init` (the
   dataclass __init__) is the class's __init__. False if the class is not a plain heap type. */
static PyObject *codec_install_constructor(PyObject *self, PyObject *init) {
    FrameCodecObject *c = (FrameCodecObject *)self;
    PyTypeObject *cls = c->cls;
    if (Py_TYPE(cls) != &PyType_Type || !PyType_HasFeature(cls, Py_TPFLAGS_HEAPTYPE))
        Py_RETURN_FALSE;
    if (type_table_put(&ctor_codecs, (PyObject *)cls, self) < 0) return NULL;
    Py_XSETREF(c->py_init, Py_NewRef(init));
    c->ctor_version = 0;
    c->ctor_on = 1;
    c->saved_vectorcall = cls->tp_vectorcall == ctor_vectorcall ? NULL : cls->tp_vectorcall;
    cls->tp_vectorcall = ctor_vectorcall;
    if (cls->tp_dealloc == pooled_dealloc) {
        /* Installed before (by another codec for the class): its instances go to the codec
           the table now names, this one. */
    } else if (poolable(cls)) {
        /* The tp_dealloc of a class statement (subtype_dealloc) or slotted_dealloc: both free
           what pooled_dealloc frees. It is kept for enable_constructor, so that pure_python()
           frees the instances as the class statement made them do. */
        c->saved_dealloc = cls->tp_dealloc;
        c->pooled_here = 1;
        cls->tp_dealloc = pooled_dealloc;
    } else {
        install_slotted_dealloc(cls, &c->saved_dealloc);
    }
    Py_RETURN_TRUE;
}

/* enable_constructor(on): switch the installed constructor off (cls(...) runs __init__) or on. */
static PyObject *codec_enable_constructor(PyObject *self, PyObject *on) {
    FrameCodecObject *c = (FrameCodecObject *)self;
    int enable = PyObject_IsTrue(on);
    if (enable < 0) return NULL;
    if (c->py_init == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the constructor is not installed");
        return NULL;
    }
    c->ctor_on = enable;
    c->cls->tp_vectorcall = enable ? ctor_vectorcall : c->saved_vectorcall;
    if (c->pooled_here)
        c->cls->tp_dealloc = enable ? pooled_dealloc : c->saved_dealloc;
    else
        enable_slotted_dealloc(c->cls, c->saved_dealloc, enable);
    Py_RETURN_NONE;
}

static PyObject *codec_constructor_enabled(PyObject *self, void *closure) {
    FrameCodecObject *c = (FrameCodecObject *)self;
    return PyBool_FromLong(c->ctor_on && c->cls->tp_vectorcall == ctor_vectorcall);
}

static PyMethodDef codec_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))codec_decode, METH_FASTCALL,
     "decode(cls, data): the struct class's decode."},
    {"decode_from", (PyCFunction)(void (*)(void))codec_decode_from, METH_FASTCALL,
     "decode_from(cls, buf, pos, end): the struct class's decode_from."},
    {"own_decode", (PyCFunction)(void (*)(void))codec_own_decode, METH_FASTCALL,
     "decode(data) for the codec's own class."},
    {"own_decode_from", (PyCFunction)(void (*)(void))codec_own_decode_from, METH_FASTCALL,
     "decode_from(buf, pos, end) for the codec's own class."},
    {"decode_directed", (PyCFunction)(void (*)(void))codec_decode_directed,
     METH_FASTCALL | METH_KEYWORDS,
     "decode(cls, data, to_server=False): the decode of a struct decoding by direction."},
    {"decode_from_directed", (PyCFunction)(void (*)(void))codec_decode_from_directed,
     METH_FASTCALL | METH_KEYWORDS,
     "decode_from(cls, buf, pos, end, to_server=False), as decode_directed."},
    {"own_decode_directed", (PyCFunction)(void (*)(void))codec_own_decode_directed,
     METH_FASTCALL | METH_KEYWORDS, "decode_directed for the codec's own class."},
    {"own_decode_from_directed", (PyCFunction)(void (*)(void))codec_own_decode_from_directed,
     METH_FASTCALL | METH_KEYWORDS, "decode_from_directed for the codec's own class."},
    {"install_constructor", codec_install_constructor, METH_O,
     "install_constructor(init): the compiled constructor for cls."},
    {"enable_constructor", codec_enable_constructor, METH_O,
     "enable_constructor(on): switch the compiled constructor on or off."},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------------------------------ */
/* construction */

static int codec_traverse(FrameCodecObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->cls);
    Py_VISIT(self->py_encode);
    Py_VISIT(self->py_decode);
    Py_VISIT(self->py_decode_from);
    Py_VISIT(self->py_init);
    for (Py_ssize_t i = 0; i < self->nrows; i++) {
        Py_VISIT(self->rows[i].name);
        Py_VISIT(self->rows[i].obj);
        Py_VISIT(self->rows[i].dispatch_attr);
        Py_VISIT(self->rows[i].body_fields);
    }
    return 0;
}

static int codec_clear(FrameCodecObject *self) {
    Py_CLEAR(self->cls);
    Py_CLEAR(self->py_encode);
    Py_CLEAR(self->py_decode);
    Py_CLEAR(self->py_decode_from);
    Py_CLEAR(self->py_init);
    Py_CLEAR(self->kw_names);
    for (Py_ssize_t i = 0; i < self->nrows; i++) {
        Py_CLEAR(self->rows[i].name);
        Py_CLEAR(self->rows[i].obj);
        Py_CLEAR(self->rows[i].dispatch_attr);
        Py_CLEAR(self->rows[i].body_fields);
    }
    return 0;
}

static void codec_dealloc(FrameCodecObject *self) {
    PyObject_GC_UnTrack(self);
    drain_pool(self);
    codec_clear(self);
    for (Py_ssize_t i = 0; i < self->nrows; i++) {
        for (Py_ssize_t k = 0; self->rows[i].prog && k < self->rows[i].prog_len; k++)
            Py_XDECREF(self->rows[i].prog[k].name);
        PyMem_Free(self->rows[i].prog);
    }
    PyMem_Free(self->rows);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int bad_row(Py_ssize_t i, const char *why) {
    PyErr_Format(PyExc_ValueError, "FrameCodec row %zd: %s", i, why);
    return -1;
}

/* Whether the program of row i of `self` reads only earlier integer rows, params it has and
   (for an array_args row) the item's index, and leaves `want` values. */
static int check_prog(FrameCodecObject *self, Py_ssize_t i, int want) {
    const Row *r = &self->rows[i];
    int top = 0;
    for (Py_ssize_t k = 0; k < r->prog_len; k++) {
        const Step *st = &r->prog[k];
        int need = 0, effect = -1;
        if (st->op < X_FIELD || st->op >= X_END) return bad_row(i, "unknown step");
        switch (st->op) {
        case X_FIELD: {
            /* A value row's program runs on encode only, where every stored row is there
               (a bit_field's, at its bits row: before it), and so is a derived key. */
            int on_encode = r->op == OP_VALUE || r->op == OP_BIT_FIELD;
            Py_ssize_t last = on_encode ? self->nrows : i;
            int at = st->arg >= 0 && st->arg < last && st->arg != i ? self->rows[st->arg].op : 0;
            if (at != 0 && st->arg > i && self->rows[st->arg].offset < 0
                    && !(at == OP_DERIVED_KEY && r->op == OP_VALUE))
                at = 0;
            if (at != OP_INT && at != OP_VARINT && at != OP_BOOL && at != OP_CONDITION
                    && at != OP_VALUE && at != OP_DERIVE && at != OP_BIT_FIELD
                    && at != OP_DERIVED_KEY && at != OP_MARKER)
                return bad_row(i, "a program reads earlier integer rows only");
            effect = 1;
            break;
        }
        case X_HAS: case X_LEN:
            /* A guard's reads an earlier row: on decode its value is there. */
            if (r->op != OP_VALUE && r->op != OP_BIT_FIELD && !(r->op == OP_GUARD && st->arg < i))
                return bad_row(i, "has() and len() are of programs run on encode only, or a "
                                  "guard's of an earlier field");
            if (st->arg < 0 || st->arg >= self->nrows || self->rows[st->arg].offset < 0)
                return bad_row(i, "has() and len() read a stored field");
            effect = 1;
            break;
        case X_PARAM:
            if (st->arg < 0 || st->arg >= self->nparams) return bad_row(i, "no such param");
            effect = 1;
            break;
        case X_INDEX:
            if (r->op != OP_ARRAY_ARGS) return bad_row(i, "only an array's items have an index");
            effect = 1;
            break;
        case X_CONST: effect = 1; break;
        case X_NOT: case X_NEG: need = 1; effect = 0; break;
        case X_SELECT: need = 3; effect = -2; break;
        default: need = 2; break;
        }
        if (top < need) return bad_row(i, "a program does not balance");
        top += effect;
        if (top > EXPR_MAX_DEPTH) return bad_row(i, "a program is too deep");
    }
    return top == want ? 0 : bad_row(i, "a program does not leave its values");
}

/* Check TANK's rows (and the row a guard guards) as check_row checks the others. */
static int check_tank_row(FrameCodecObject *self, Py_ssize_t i) {
    Row *r = &self->rows[i];
    int fixed = (r->op == OP_VALUE || r->op == OP_SIZE_OF_STRUCT) && !(r->flags & F_VARINT);
    if (fixed && r->width != 1 && r->width != 2 && r->width != 3 && r->width != 4
            && r->width != 8)
        return bad_row(i, "integer width must be 1, 2, 3, 4 or 8");
    if (r->flags & F_GUARDED && (i == 0 || self->rows[i - 1].op != OP_GUARD))
        return bad_row(i, "a guarded row comes right after its guard");
    int nested = r->op == OP_STRUCT_ARGS || r->op == OP_ARRAY_ARGS || r->op == OP_STRUCT_SIZED;
    if (nested) {
        if (r->obj == NULL || Py_TYPE(r->obj) != &FrameCodec_Type)
            return bad_row(i, "needs the nested struct's codec");
        long long takes = r->op == OP_STRUCT_SIZED ? 0 : (long long)r->number;
        if (((FrameCodecObject *)r->obj)->nparams != takes || takes > EXPR_MAX_DEPTH)
            return bad_row(i, "the arguments must be the nested struct's params");
    }
    if ((r->op == OP_GUARD || r->op == OP_VALUE || r->op == OP_DERIVE || r->op == OP_STRUCT_ARGS
         || r->op == OP_ARRAY_ARGS)
            && check_prog(self, i, r->op == OP_STRUCT_ARGS || r->op == OP_ARRAY_ARGS
                                   ? (int)r->number : 1) < 0)
        return -1;
    switch (r->op) {
    case OP_GUARD: {
        const Row *t = i + 1 < self->nrows ? &self->rows[i + 1] : NULL;
        int kind = t == NULL ? 0 : t->op;
        if (!(t != NULL && t->flags & F_GUARDED)
                || !(kind == OP_INT || kind == OP_VARINT || kind == OP_PREFIXED
                     || kind == OP_BYTES || kind == OP_STRUCT_ARGS || kind == OP_VALUE
                     || kind == OP_ARRAY_ARGS || kind == OP_TERMINATED || kind == OP_INT_ARRAY
                     || (kind == OP_LENENC_INT && !(t->flags & (F_LENENC_CONST | F_NULLABLE)))
                     || (kind == OP_STRUCT && t->index == PRESENT_ALWAYS)))
            return bad_row(i, "a guard needs a row it can leave out after it");
        if ((r->flags & F_EXTRA) != 0 && kind != OP_VALUE)
            return bad_row(i, "only a value row is 0 when left out");
        if ((r->flags & F_EXTRA) == 0 && kind == OP_VALUE)
            return bad_row(i, "a value row left out is 0");
        if (kind == OP_PREFIXED && t->obj != NULL)
            return bad_row(i, "a guarded prefixed row has no default");
        break;
    }
    case OP_ARRAY_ARGS:
        if (r->index >= 0 ? r->index >= i
                            || self->rows[r->index].op != (r->flags & F_EXTRA ? OP_INT
                                                                              : OP_COUNT_OF)
                            || self->rows[r->index].flags & F_GUARDED
                          : r->width < 0 || r->width >= self->nparams || r->flags & F_EXTRA)
            return bad_row(i, "an array's count is a count_of row before it or a param, "
                              "or an int row");
        break;
    case OP_MARKER:
        if (r->obj != Py_False) return bad_row(i, "a marker is False when not there");
        break;
    case OP_SIZE_RANGE: case OP_SIZE_RANGE_END: {
        int open = r->op == OP_SIZE_RANGE;
        const Row *t = r->index >= 0 && r->index < self->nrows ? &self->rows[r->index] : NULL;
        if (t == NULL || (open ? r->index <= i : r->index >= i) || t->index != i
                || t->op != (open ? OP_SIZE_RANGE_END : OP_SIZE_RANGE)
                || (open && r->flags & (F_SIGNED | F_GUARDED)))
            return bad_row(i, "a size_range row (unsigned) needs its end row after it");
        break;
    }
    case OP_SIZE_OF_STRUCT:
        if (r->index <= i || r->index >= self->nrows
                || self->rows[r->index].op != OP_STRUCT_SIZED
                || self->rows[r->index].index != i)
            return bad_row(i, "a struct's size needs its struct_sized row after it");
        break;
    case OP_STRUCT_SIZED:
        if (r->index < 0 || r->index >= i || self->rows[r->index].op != OP_SIZE_OF_STRUCT)
            return bad_row(i, "a sized struct needs its size row before it");
        break;
    }
    return 0;
}

/* Check a bits, bit_field or derived_key row as check_row checks the others. */
static int check_bits_row(FrameCodecObject *self, Py_ssize_t i) {
    const Row *r = &self->rows[i];
    switch (r->op) {
    case OP_BITS:
        if (r->width != 1 && r->width != 2 && r->width != 4 && r->width != 8)
            return bad_row(i, "integer width must be 1, 2, 4 or 8");
        if (r->flags & F_SIGNED) return bad_row(i, "bits are of an unsigned integer");
        break;
    case OP_BIT_FIELD: {
        const Row *t = r->index >= 0 && r->index < i ? &self->rows[r->index] : NULL;
        if (t == NULL || t->op != OP_BITS || i > r->index + t->index)
            return bad_row(i, "a bit field comes right after its bits row (or its other parts)");
        if (r->width < 1 || r->number + (unsigned long long)r->width > 8ULL * t->width)
            return bad_row(i, "a bit field's bits are inside its integer");
        if ((r->flags & F_EXTRA) && r->width != 1) return bad_row(i, "a bool is one bit");
        if (r->obj != NULL && (!PyDict_Check(r->obj) || r->dispatch_attr == NULL
                               || !PyType_Check(r->dispatch_attr) || r->prog != NULL))
            return bad_row(i, "an enum part needs its members by value and its class");
        if (r->prog != NULL && check_prog(self, i, 1) < 0) return -1;
        break;
    }
    case OP_DERIVED_KEY:
        if (r->prog == NULL || check_prog(self, i, 1) < 0)
            return r->prog == NULL ? bad_row(i, "a derived key needs its program") : -1;
        if (r->index <= i || r->index >= self->nrows || self->rows[r->index].op != OP_SWITCH)
            return bad_row(i, "a derived key needs its switch row after it");
        break;
    }
    return 0;
}

/* Check a masked_bytes row (its key an earlier stored integer or bytes row, its size an
   earlier size row measuring it, a derived integer, or none) or a requires row (after
   every field row; its program reads earlier stored rows, whose values it checks itself). */
static int check_websocket_row(FrameCodecObject *self, Py_ssize_t i) {
    const Row *r = &self->rows[i];
    if (r->op == OP_MASKED_BYTES) {
        const Row *key = r->number < (unsigned long long)i ? &self->rows[r->number] : NULL;
        if (key == NULL || key->offset < 0
                || (r->width == 0 ? key->op != OP_FIXED || key->number != TEXT_BYTES
                                  : key->op != OP_INT && key->op != OP_CONDITION))
            return bad_row(i, "a mask's key is an earlier integer or bytes row");
        if (r->width != 0 && r->width != 1 && r->width != 2 && r->width != 3 && r->width != 4
                && r->width != 8)
            return bad_row(i, "integer width must be 1, 2, 3, 4 or 8");
        if (r->index >= 0) {
            const Row *size = r->index < i ? &self->rows[r->index] : NULL;
            if (size == NULL || !(size->op == OP_SIZE ? size->index == i : size->op == OP_DERIVE))
                return bad_row(i, "masked bytes are sized by an earlier size or derive row");
        }
        return 0;
    }
    for (Py_ssize_t k = i + 1; k < self->nrows; k++)
        if (self->rows[k].op != OP_REQUIRES && self->rows[k].op != OP_SKIP_TRAILING)
            return bad_row(i, "rules come after every field");
    int top = 0;
    for (Py_ssize_t k = 0; k < r->prog_len; k++) {
        const Step *st = &r->prog[k];
        if (st->op == X_FIELD || st->op == X_LEN || st->op == X_HAS) {
            if (st->arg < 0 || st->arg >= i || self->rows[st->arg].offset < 0)
                return bad_row(i, "a rule reads earlier stored rows");
            top++;
        } else if (st->op == X_CONST) {
            top++;
        } else if (st->op == X_NOT || st->op == X_NEG) {
            if (top < 1) return bad_row(i, "a rule's program does not balance");
        } else if (st->op >= X_AND && st->op <= X_GE) {
            if (top < 2) return bad_row(i, "a rule's program does not balance");
            top--;
        } else {
            return bad_row(i, "unknown step in a rule");
        }
        if (top > EXPR_MAX_DEPTH) return bad_row(i, "a rule's program is too deep");
    }
    return top == 1 ? 0 : bad_row(i, "a rule's program does not balance");
}

/* Check row i against the others: the references the codec follows without checking. */
static int check_row(FrameCodecObject *self, Py_ssize_t i) {
    Row *r = &self->rows[i];
    if (r->op <= 0 || r->op >= OP_END) return bad_row(i, "unknown operation");
    int has_int = r->op <= OP_CHECKSUM || r->op == OP_SWITCH_KEY || r->op == OP_DEFAULT
                  || r->op == OP_COUNT_OF || r->op == OP_CONDITION || (r->op == OP_PREFIXED && !(r->flags & F_VARINT))
                  || r->op == OP_BLOCKS || (r->op == OP_PROTO_PREFIXED && !(r->flags & F_VARINT))
                  || (r->op == OP_PROTO_PREFIXED_WHEN && !(r->flags & F_VARINT))
                  || r->op == OP_LEN_VALUE || r->op == OP_INT_WHEN || r->op == OP_INT_ARRAY
                  || (r->op == OP_PREFIXED_OPTIONAL && !(r->flags & F_VARINT))
                  || r->op == OP_MARKER || r->op == OP_SIZE_RANGE;
    if (has_int && r->width != 1 && r->width != 2 && r->width != 3 && r->width != 4
            && r->width != 8)
        return bad_row(i, "integer width must be 1, 2, 3, 4 or 8");
    int stored = r->op == OP_INT || r->op == OP_PROTO || r->op == OP_BYTES
                 || r->op == OP_STRUCT || r->op == OP_UUID || r->op == OP_SWITCH
                 || r->op == OP_STRUCT_RUN || r->op == OP_PREFIXED || r->op == OP_DEFAULT
                 || r->op == OP_VARINT || r->op == OP_BOOL || r->op == OP_STRUCT_ARRAY
                 || r->op == OP_CONDITION || r->op == OP_BLOCKS || r->op == OP_PROTO_PREFIXED
                 || r->op == OP_STRUCT_WHEN || r->op == OP_PROTO_PREFIXED_WHEN
                 || r->op == OP_INT_WHEN || r->op == OP_PREFIXED_OPTIONAL || r->op == OP_DEFAULT_BOOL
                 || (r->op == OP_DERIVE && r->name != NULL) || r->op == OP_STRUCT_ARGS
                 || r->op == OP_ARRAY_ARGS || r->op == OP_STRUCT_SIZED || r->op == OP_MESSAGE_BYTES
                 || r->op == OP_LENENC || r->op == OP_FIXED
                 || r->op == OP_TEXT_REST || r->op == OP_STRUCT_RUN_WHEN || r->op == OP_FLOAT
                 || r->op == OP_INT_ARRAY || (r->op == OP_BIT_FIELD && r->prog == NULL)
                 || r->op == OP_MASKED_BYTES || r->op == OP_TERMINATED || r->op == OP_INT_RANGE
                 || (r->op == OP_LENENC_INT && !(r->flags & F_LENENC_CONST))
                 || r->op == OP_LENENC_OPTIONAL || r->op == OP_MARKER;
    if (stored != (r->offset >= 0)) return bad_row(i, "stored fields, and only they, need a slot");
    if (is_bits_op(r->op) && check_bits_row(self, i) < 0) return -1;
    if (r->op == OP_SIZE) {
        if (r->index <= i || r->index >= self->nrows) return bad_row(i, "size of a later row");
        Row *t = &self->rows[r->index];
        if ((t->op != OP_PROTO && t->op != OP_BYTES && t->op != OP_SWITCH
             && t->op != OP_STRUCT_RUN && t->op != OP_MASKED_BYTES) || t->index != i)
            return bad_row(i, "the measured row must be protobuf, bytes, masked bytes, a switch "
                              "or a struct_run sized by this one");
        if ((t->op == OP_SWITCH || t->op == OP_STRUCT_RUN) && r->index != i + 1)
            return bad_row(i, "a switch or struct_run comes right after its size");
    }
    if (r->op == OP_SWITCH) {
        if (r->obj == NULL || !PyDict_Check(r->obj) || r->body_fields == NULL)
            return bad_row(i, "a switch needs its case tables");
        if ((r->flags & F_EXTRA) != 0
                && (r->dispatch_attr == NULL || !PyDict_Check(r->dispatch_attr)))
            return bad_row(i, "a switch decoding by direction needs its cases each way");
        if (r->index >= 0 && r->index != i - 1)
            return bad_row(i, "a switch comes right after its size");
        if (r->number >= (unsigned long long)i
                || (self->rows[r->number].op != OP_SWITCH_KEY
                    && self->rows[r->number].op != OP_DERIVED_KEY)
                || self->rows[r->number].index != i)
            return bad_row(i, "a switch needs its key row before it");
    }
    if (r->op == OP_SWITCH_KEY
            && (r->index <= i || r->index >= self->nrows || self->rows[r->index].op != OP_SWITCH))
        return bad_row(i, "a switch key needs its switch row after it");
    if ((r->op == OP_STRUCT_RUN || r->op == OP_STRUCT_ARRAY)
            && (r->obj == NULL || Py_TYPE(r->obj) != &FrameCodec_Type))
        return bad_row(i, "needs the nested struct's codec");
    if (r->op == OP_STRUCT_RUN && r->index >= 0
            && (r->index != i - 1 || self->rows[r->index].op != OP_SIZE))
        return bad_row(i, "a sized struct_run comes right after its size row");
    if (r->op == OP_FLOAT && r->width != 4 && r->width != 8)
        return bad_row(i, "a float is 4 or 8 bytes");
    if (r->op == OP_COUNT_OF && (r->index <= i || r->index >= self->nrows
                                 || (self->rows[r->index].op != OP_STRUCT_ARRAY
                                     && self->rows[r->index].op != OP_ARRAY_ARGS
                                     && self->rows[r->index].op != OP_INT_ARRAY)
                                 || self->rows[r->index].index != i))
        return bad_row(i, "a count needs the struct_array row it counts after it");
    if (r->op == OP_CONDITION || r->op == OP_STRUCT_RUN_WHEN) {
        int top = 0;
        for (Py_ssize_t k = 0; k < r->prog_len; k++) {
            const Step *st = &r->prog[k];
            if (st->op < X_FIELD || st->op >= X_END) return bad_row(i, "unknown step");
            if (st->op == X_FIELD) {
                int at = st->arg >= 0 && st->arg < i ? self->rows[st->arg].op : 0;
                if (at != OP_INT && at != OP_VARINT && at != OP_BOOL)
                    return bad_row(i, "a condition reads earlier integer rows only");
            }
            if (st->op == X_HAS) {
                const Row *at = st->arg >= 0 && st->arg < i ? &self->rows[st->arg] : NULL;
                if (at == NULL || at->op != OP_STRUCT || at->index == PRESENT_ALWAYS)
                    return bad_row(i, "has() reads earlier optional struct rows only");
            }
            top += st->op <= X_CONST || st->op == X_HAS ? 1 : st->op <= X_NEG ? 0 : -1;
            if (top < 1 || top > EXPR_MAX_DEPTH)
                return bad_row(i, "a condition's program does not balance");
        }
        if (top != 1) return bad_row(i, "a condition's program does not balance");
    }
    if (r->op == OP_SIZE_REST && ((long long)r->number > INT_MAX || (long long)r->number < -INT_MAX))
        return bad_row(i, "a size's adjustment is a 32-bit integer");
    if ((r->op == OP_STRUCT_ARRAY || r->op == OP_INT_ARRAY) && r->prog != NULL) {
        /* Counted by a program (count: an expression, MariaDB's scramble): of earlier stored
           integer rows, which encoding reads from the slots. */
        if (r->index != -1) return bad_row(i, "an array counted by a program has no count_of row");
        for (Py_ssize_t k = 0; k < r->prog_len; k++) {
            const Step *st = &r->prog[k];
            const Row *at = st->arg >= 0 && st->arg < i ? &self->rows[st->arg] : NULL;
            if (st->op == X_FIELD && (at == NULL || at->offset < 0
                                      || (at->op != OP_INT && at->op != OP_VARINT
                                          && at->op != OP_BOOL)))
                return bad_row(i, "an array's count reads earlier integer rows only");
            if (st->op == X_HAS || st->op == X_LEN || st->op == X_INDEX || st->op == X_PARAM)
                return bad_row(i, "an array's count reads earlier integer rows only");
        }
        if (check_prog(self, i, 1) < 0) return -1;
    } else if ((r->op == OP_STRUCT_ARRAY || r->op == OP_INT_ARRAY)
            && (r->index < 0 || r->index >= i || self->rows[r->index].op != OP_COUNT_OF))
        return bad_row(i, "an array needs its count_of row before it");
    if (r->op == OP_PREFIXED && r->number > TEXT_MUTF8) return bad_row(i, "unknown text kind");
    if ((r->op == OP_LENENC || r->op == OP_LENENC_OPTIONAL) && r->number > TEXT_UTF8)
        return bad_row(i, "unknown text kind");
    if (r->op == OP_LENENC_OPTIONAL && r->flags & F_NULLABLE)
        return bad_row(i, "an optional lenenc row is not nullable");
    if ((r->op == OP_FIXED || r->op == OP_TEXT_REST) && r->number > TEXT_UTF8)
        return bad_row(i, "unknown text kind");
    if (r->op == OP_FIXED && r->index < 0) return bad_row(i, "a fixed row needs its length");
    if (r->op == OP_CONST_BYTES && (r->obj == NULL || !PyBytes_CheckExact(r->obj)))
        return bad_row(i, "a const_bytes row needs its bytes");
    if (r->op == OP_STRUCT_RUN_WHEN && (r->obj == NULL || Py_TYPE(r->obj) != &FrameCodec_Type))
        return bad_row(i, "needs the nested struct's codec");
    if (r->op == OP_PREFIXED && r->obj != NULL && !PyUnicode_CheckExact(r->obj)
            && !PyBytes_CheckExact(r->obj))
        return bad_row(i, "a prefixed default is str or bytes");
    if (r->op == OP_DEFAULT && (r->obj == NULL || !PyLong_CheckExact(r->obj)))
        return bad_row(i, "a default integer needs its value");
    if (r->op == OP_UUID && (r->obj == NULL || r->dispatch_attr == NULL))
        return bad_row(i, "a uuid needs the UUID class and SafeUUID.unknown");
    if (r->op == OP_SKIP_TRAILING && i != self->nrows - 1)
        return bad_row(i, "skip_trailing is the last row");
    if ((r->op == OP_PROTO || r->op == OP_BYTES) && r->index >= 0
            && (r->index >= i || self->rows[r->index].op != OP_SIZE))
        return bad_row(i, "sized by an earlier size row");
    if (r->op == OP_PROTO && r->index < 0) return bad_row(i, "a protobuf field needs a size row");
    if (r->op == OP_CHECKSUM && !PyCallable_Check(r->obj))
        return bad_row(i, "a checksum needs its function");
    if (r->op == OP_PROTO && !PyType_Check(r->obj)) return bad_row(i, "needs the message class");
    if (r->op == OP_PROTO && (r->dispatch_attr == NULL) != (r->body_fields == NULL))
        return bad_row(i, "dispatch needs its attribute and body table");
    if (r->body_fields != NULL && !PyDict_Check(r->body_fields))
        return bad_row(i, "the body table must be a dict");
    if (r->op == OP_BLOCKS) {
        if (r->obj == NULL || (Py_TYPE(r->obj) != &FrameCodec_Type && !PyType_Check(r->obj)))
            return bad_row(i, "blocks need the nested struct's codec or class");
        if (r->len_width != 1 && r->len_width != 2 && r->len_width != 4 && r->len_width != 8)
            return bad_row(i, "a block length's width must be 1, 2, 4 or 8");
        if (r->block_size <= 0) return bad_row(i, "a block holds at least one byte");
    }
    if ((r->op == OP_PROTO_PREFIXED || r->op == OP_PROTO_PREFIXED_WHEN)
            && (r->obj == NULL || !PyType_Check(r->obj)))
        return bad_row(i, "needs the message class");
    if (r->op == OP_STRUCT_WHEN && (r->obj == NULL || Py_TYPE(r->obj) != &FrameCodec_Type))
        return bad_row(i, "needs the nested struct's codec");
    if (r->op == OP_PREFIXED_OPTIONAL && r->number > TEXT_MUTF8)
        return bad_row(i, "unknown text kind");
    if (r->op == OP_DEFAULT_BOOL && (r->obj == NULL || !PyBool_Check(r->obj)))
        return bad_row(i, "a default bool needs its value");
    if (r->op == OP_LEN_VALUE) {
        const Row *t = r->index >= 0 && r->index < self->nrows ? &self->rows[r->index] : NULL;
        if (t == NULL || t->offset < 0 || !(t->op == OP_BYTES
                                            || (t->op == OP_PREFIXED && t->number == TEXT_BYTES)))
            return bad_row(i, "a length value needs a bytes row");
    }
    if (r->op == OP_STRUCT_WHEN || r->op == OP_PROTO_PREFIXED_WHEN || r->op == OP_INT_WHEN) {
        int top = 0;
        for (Py_ssize_t k = 0; k < r->prog_len; k++) {
            const Step *st = &r->prog[k];
            int at = st->arg >= 0 && st->arg < i ? self->rows[st->arg].op : 0;
            if (st->op < X_FIELD || st->op >= X_END) return bad_row(i, "unknown step");
            if (st->op == X_FIELD && at != OP_INT && at != OP_VARINT && at != OP_BOOL)
                return bad_row(i, "a condition reads earlier integer rows only");
            if (st->op == X_ATTR && ((at != OP_PROTO_PREFIXED && at != OP_PROTO)
                                     || st->name == NULL || !PyUnicode_CheckExact(st->name)))
                return bad_row(i, "an attribute step reads an earlier message row");
            if (st->op == X_LEN && !(at == OP_BYTES || (at == OP_PREFIXED
                                                        && self->rows[st->arg].number == TEXT_BYTES)))
                return bad_row(i, "a length step reads an earlier bytes row");
            top += st->op <= X_CONST || st->op == X_ATTR || st->op == X_LEN ? 1
                   : st->op <= X_NEG ? 0 : -1;
            if (top < 1 || top > EXPR_MAX_DEPTH)
                return bad_row(i, "a condition's program does not balance");
        }
        if (top != 1) return bad_row(i, "a condition's program does not balance");
    }
    if (r->op == OP_STRUCT) {
        if (r->obj == NULL || Py_TYPE(r->obj) != &FrameCodec_Type)
            return bad_row(i, "needs the nested struct's codec");
        if (r->index < PRESENT_ALWAYS || r->index > PRESENT_PEEK)
            return bad_row(i, "unknown presence");
        if (r->index == PRESENT_PEEK && r->width != 1 && r->width != 2 && r->width != 3
                && r->width != 4 && r->width != 8)
            return bad_row(i, "peek width must be 1, 2, 3, 4 or 8");
    }
    if ((r->op == OP_MASKED_BYTES || r->op == OP_REQUIRES) && check_websocket_row(self, i) < 0)
        return -1;
    if (r->op == OP_INT_RANGE && !(r->flags & F_VARINT) && r->width != 1 && r->width != 2
            && r->width != 3 && r->width != 4 && r->width != 8)
        return bad_row(i, "integer width must be 1, 2, 3, 4 or 8");
    if (r->op == OP_TERMINATED && (r->obj == NULL || !PyBytes_CheckExact(r->obj)
                                   || PyBytes_GET_SIZE(r->obj) == 0 || r->number > TEXT_MUTF8))
        return bad_row(i, "a terminated row needs its terminator and text kind");
    return check_tank_row(self, i);
}

/* Parse the program `steps` ((X_* number, argument) pairs) into row r. */
static int parse_prog(Row *r, PyObject *steps) {
    if (!PyTuple_Check(steps)) {
        PyErr_SetString(PyExc_ValueError, "FrameCodec: a program is a tuple of steps");
        return -1;
    }
    Py_ssize_t len = PyTuple_GET_SIZE(steps);
    r->prog = PyMem_Calloc(len ? (size_t)len : 1, sizeof(Step));
    if (r->prog == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    r->prog_len = len;
    for (Py_ssize_t k = 0; k < len; k++) {
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(steps, k), "iL:program step", &r->prog[k].op,
                              &r->prog[k].arg))
            return -1;
    }
    return 0;
}

/* A guarded row's program from `steps`: (word, row) or (word, constant) pairs, and (word, row,
   attribute name) triples. 0, or -1 (an error set, or none for a malformed program). */
static int parse_guard_program(Row *r, PyObject *steps) {
    if (!PyTuple_Check(steps)) return -1;
    Py_ssize_t len = PyTuple_GET_SIZE(steps);
    r->prog = PyMem_Calloc(len ? (size_t)len : 1, sizeof(Step));
    if (r->prog == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    r->prog_len = len;
    for (Py_ssize_t k = 0; k < len; k++) {
        PyObject *name = NULL;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(steps, k), "iL|O!:guard step", &r->prog[k].op,
                              &r->prog[k].arg, &PyUnicode_Type, &name))
            return -1;
        if (name != NULL) {
            Py_INCREF(name);
            PyUnicode_InternInPlace(&name);
            r->prog[k].name = name;
        }
    }
    return 0;
}

/* FrameCodec(cls, rows, check_end, py_encode, py_decode, py_decode_from[, nparams])
   rows: (op, slot, width, flags, index, number, obj, dispatch_attr, body_fields, present_slot)
   per field, in
   wire order; see runtime/codec/compiled_frames.py. A row of TANK's ops with a program has
   it in dispatch_attr's place; nparams: how many params the struct takes (0: none). */
static PyObject *codec_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *cls, *rows, *py_encode, *py_decode, *py_decode_from;
    int check_end, nparams = 0;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "FrameCodec() takes positional arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!pOOO|i:FrameCodec", &PyType_Type, &cls, &PyTuple_Type,
                          &rows, &check_end, &py_encode, &py_decode, &py_decode_from,
                          &nparams))
        return NULL;
    if (nparams < 0 || nparams > EXPR_MAX_DEPTH) {
        PyErr_Format(PyExc_ValueError, "FrameCodec: at most %d params", EXPR_MAX_DEPTH);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(rows);
    if (n > FRAME_MAX_ROWS) {
        PyErr_Format(PyExc_ValueError, "FrameCodec: at most %d rows", FRAME_MAX_ROWS);
        return NULL;
    }
    FrameCodecObject *self = (FrameCodecObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = codec_vectorcall;
    self->cls = (PyTypeObject *)Py_NewRef(cls);
    self->check_end = check_end;
    self->nparams = nparams;
    self->py_encode = Py_NewRef(py_encode);
    self->py_decode = Py_NewRef(py_decode);
    self->py_decode_from = Py_NewRef(py_decode_from);
    self->rows = PyMem_Calloc(n ? n : 1, sizeof(Row));
    if (self->rows == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyTuple_GET_ITEM(rows, i), *slot_name, *obj, *attr, *body, *present;
        Row *r = &self->rows[i];
        if (!PyArg_ParseTuple(row, "iOiinKOOOO:FrameCodec row", &r->op, &slot_name, &r->width,
                              &r->flags, &r->index, &r->number, &obj, &attr, &body, &present))
            goto fail;
        self->nrows = i + 1;  /* from here on freed with the codec */
        r->present_offset = -1;
        r->int_offset = r->safe_offset = -1;
        if (r->op == OP_UUID) {
            if (!PyType_Check(obj)) {
                bad_row(i, "a uuid row needs the UUID class");
                goto fail;
            }
            if ((r->int_offset = member_offset((PyTypeObject *)obj, str_int)) < 0
                    || (r->safe_offset = member_offset((PyTypeObject *)obj, str_is_safe)) < 0)
                goto fail;
        }
        if (r->op == OP_SWITCH_KEY) self->has_temp = 1;
        if (r->op == OP_BLOCKS) {
            if (!PyTuple_Check(body)
                    || !PyArg_ParseTuple(body, "iinn:blocks row", &r->len_width, &r->len_flags,
                                         &r->block_size, &r->max_blocks)) {
                if (!PyErr_Occurred()) bad_row(i, "blocks need their length, size and limit");
                goto fail;
            }
            body = Py_None;  /* read into the row, not kept */
        }
        if (r->op == OP_STRUCT_WHEN || r->op == OP_PROTO_PREFIXED_WHEN || r->op == OP_INT_WHEN) {
            if (parse_guard_program(r, body) < 0) {
                if (!PyErr_Occurred()) bad_row(i, "a guarded row needs its program");
                goto fail;
            }
            body = Py_None;
        }
        if (r->op == OP_VALUE) self->has_temp = 1;  /* read for the rows after it */
        if (r->op == OP_BIT_FIELD || r->op == OP_DERIVED_KEY) {
            self->has_temp = 1;  /* a part with a value, a key: read, not stored */
            if (r->op == OP_DERIVED_KEY) self->has_derived_key = 1;
            /* A part's value program, or the class of an enum part's members. */
            if (PyTuple_Check(attr) && parse_prog(r, attr) < 0) goto fail;
        }
        /* A derived size is not stored either (it has no slot name). */
        if (r->op == OP_DERIVE && slot_name == Py_None) self->has_temp = 1;
        if (r->op == OP_REQUIRES && parse_prog(r, obj) < 0) goto fail;
        if (r->op == OP_INT_RANGE && (!PyTuple_Check(obj) || !PyArg_ParseTuple(
                obj, "KK:int_range bounds", &r->range_lo, &r->range_hi))) {
            if (!PyErr_Occurred()) bad_row(i, "an int_range row needs its bounds");
            goto fail;
        }
        if (r->op == OP_DELIMITED) {
            if (i != 0 || !PyBytes_CheckExact(obj) || PyBytes_GET_SIZE(obj) == 0) {
                bad_row(i, "a delimiter is the first row, and bytes");
                goto fail;
            }
            self->delimiter = obj;  /* the row's reference */
        }
        if (is_tank_op(r->op) && attr != Py_None && parse_prog(r, attr) < 0) goto fail;
        /* An array counted by a program has it in dispatch_attr's place. */
        if ((r->op == OP_STRUCT_ARRAY || r->op == OP_INT_ARRAY) && attr != Py_None
                && parse_prog(r, attr) < 0)
            goto fail;
        if (r->op == OP_MESSAGE_BYTES) {
            /* The size's slot in the message of an earlier proto row. */
            const Row *holder = r->index >= 0 && r->index < i ? &self->rows[r->index] : NULL;
            if (holder == NULL || holder->op != OP_PROTO || holder->obj == NULL
                    || !PyType_Check(holder->obj) || !PyUnicode_Check(obj)) {
                bad_row(i, "message_bytes needs an earlier proto row and its size's slot name");
                goto fail;
            }
            if ((r->size_offset = member_offset((PyTypeObject *)holder->obj, obj)) < 0)
                goto fail;
            self->has_message_sizes = 1;
        }
        if (r->op == OP_CONDITION || r->op == OP_STRUCT_RUN_WHEN) {
            /* A struct_run_when row's obj is its nested codec: its program comes third. */
            PyObject *program = r->op == OP_CONDITION ? obj : attr;
            if (!PyTuple_Check(program)) {
                bad_row(i, "a condition needs its program");
                goto fail;
            }
            Py_ssize_t len = PyTuple_GET_SIZE(program);
            r->prog = PyMem_Calloc(len ? (size_t)len : 1, sizeof(Step));
            if (r->prog == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            r->prog_len = len;
            for (Py_ssize_t k = 0; k < len; k++) {
                if (!PyArg_ParseTuple(PyTuple_GET_ITEM(program, k), "iL:condition step",
                                      &r->prog[k].op, &r->prog[k].arg))
                    goto fail;
            }
        }
        if (present != Py_None) {
            if (!PyUnicode_Check(present) || !PyType_Check(obj)) {
                bad_row(i, "a present-dict slot is the name of a slot of the message class");
                goto fail;
            }
            r->present_offset = member_offset((PyTypeObject *)obj, present);
            if (r->present_offset < 0) goto fail;
        }
        r->obj = obj == Py_None ? NULL : Py_NewRef(obj);
        r->dispatch_attr = attr == Py_None ? NULL : Py_NewRef(attr);
        r->body_fields = body == Py_None ? NULL : Py_NewRef(body);
        r->offset = -1;
        if (slot_name != Py_None) {
            if (!PyUnicode_CheckExact(slot_name)) {
                bad_row(i, "slot names are str");
                goto fail;
            }
            Py_INCREF(slot_name);
            PyUnicode_InternInPlace(&slot_name);
            r->name = slot_name;
            if ((r->offset = member_offset(self->cls, slot_name)) < 0) goto fail;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* A bits row's parts: the bit_field rows right after it that name it. */
        Row *r = &self->rows[i];
        if (r->op != OP_BITS) continue;
        r->index = 0;
        while (i + 1 + r->index < n && self->rows[i + 1 + r->index].op == OP_BIT_FIELD
               && self->rows[i + 1 + r->index].index == i)
            r->index++;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (check_row(self, i) < 0) goto fail;
        int op = self->rows[i].op;
        self->enc_keeps |= op == OP_SIZE || op == OP_PROTO || op == OP_SIZE_OF_STRUCT
                           || op == OP_STRUCT_SIZED;
        self->enc_fills |= op == OP_SIZE_REST || op == OP_CHECKSUM || op == OP_DELIMITED;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyObject *codec_name(PyObject *self, void *closure) {
    return PyUnicode_FromString("encode");
}

static PyObject *codec_constructor_version(PyObject *self, void *closure) {
    return PyLong_FromUnsignedLong(((FrameCodecObject *)self)->ctor_version);
}

static PyObject *codec_qualname(PyObject *self, void *closure) {
    return PyUnicode_FromFormat("%s.encode", ((FrameCodecObject *)self)->cls->tp_name);
}

static PyObject *codec_wrapped(PyObject *self, void *closure) {
    return Py_NewRef(((FrameCodecObject *)self)->py_encode);
}

static PyGetSetDef codec_getset[] = {
    /* As on runtime.codec._wirecodec's Codec: the codec is the class's `encode`. */
    {"__wrapped__", codec_wrapped, NULL, "The generated Python encode this stands in for.",
     NULL},
    {"__name__", codec_name, NULL, "The method's name.", NULL},
    {"__qualname__", codec_qualname, NULL, "The method's qualified name.", NULL},
    {"constructor_enabled", codec_constructor_enabled, NULL,
     "Whether cls(...) runs the compiled constructor.", NULL},
    {"constructor_version", codec_constructor_version, NULL,
     "The class's version tag when the constructor last found it unchanged (0: none; it "
     "looks the class over on the next call).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FrameCodec_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protoframe.runtime.codec._framecodec.FrameCodec",
    .tp_doc = "The compiled encode/decode of one generated frame struct.",
    .tp_basicsize = sizeof(FrameCodecObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = codec_new,
    .tp_dealloc = (destructor)codec_dealloc,
    .tp_traverse = (traverseproc)codec_traverse,
    .tp_clear = (inquiry)codec_clear,
    .tp_vectorcall_offset = offsetof(FrameCodecObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = method_descr_get,
    .tp_methods = codec_methods,
    .tp_getset = codec_getset,
};

static struct PyModuleDef framecodec_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "protoframe.runtime.codec._framecodec",
    .m_doc = "Compiled fast path of the generated frame codecs "
             "(see runtime/codec/compiled_frames.py).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__framecodec(void) {
    if (PyType_Ready(&FrameCodec_Type) < 0) return NULL;
    str_decode_from = PyUnicode_InternFromString("decode_from");
    str_encode = PyUnicode_InternFromString("encode");
    str_init = PyUnicode_InternFromString("__init__");
    str_int = PyUnicode_InternFromString("int");
    str_is_safe = PyUnicode_InternFromString("is_safe");
    if (str_decode_from == NULL || str_encode == NULL || str_init == NULL || str_int == NULL
            || str_is_safe == NULL)
        return NULL;
    /* Without the protobuf codec (or with an older one) messages go through their methods.
       PyCapsule_Import imports only the capsule's top-level package and looks the rest up as
       attributes, so the extension module is imported first. */
    PyObject *wire_module = PyImport_ImportModule("protoframe.runtime.codec._wirecodec");
    if (wire_module == NULL) PyErr_Clear();
    Py_XDECREF(wire_module);
    wire_api = PyCapsule_Import(WIRECODEC_CAPSULE, 0);
    if (wire_api == NULL) PyErr_Clear();
    PyObject *m = PyModule_Create(&framecodec_module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "FrameCodec", (PyObject *)&FrameCodec_Type) < 0
            || PyModule_AddIntConstant(m, "HAS_WIRE_API", wire_api != NULL) < 0
            || PyModule_AddIntConstant(m, "MAX_ROWS", FRAME_MAX_ROWS) < 0
            || add_vocabulary(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
