/*
 * Columnar protobuf decoding: a run of serialized messages of one type, straight from the
 * offsets and data buffers of an Arrow binary array, into the buffers of Arrow columns
 * (validity, fixed-width values, offsets + data, struct children, list offsets), with no
 * Python object per value. runtime/spark/columnar.py builds the plan from a message's layout
 * table and turns the buffers into pyarrow arrays of the generated Spark schema.
 *
 * The decoder is deliberately narrower than the generated Python decoder: whatever it is not
 * sure to decode exactly as that decoder does (truncated or malformed bytes, invalid UTF-8,
 * a missing required field, an enum number the enum does not declare, a group, a second
 * occurrence of a singular message field, a varint of more than ten bytes, a message inside
 * its own type, which the Spark schema holds as its encoding) makes the whole row "bad": its partial output is rolled back, the row is left
 * null, and its index is reported, so that the caller decodes that row with the row path
 * (which then gives its value, or raises its own error).
 */
#include "_codec_common.h"  /* Python.h, the vocabulary and its export (add_vocabulary) */

/* ------------------------------------------------------------------------------------------ */
/* growable buffers */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    if (n) memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static inline int buf_i32(Buf *b, int32_t v) { return buf_put(b, &v, 4); }

static void buf_free(Buf *b) {
    PyMem_Free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* the plan: one column per field, a struct column per message */

typedef enum { C_FIXED, C_BOOL, C_DECIMAL, C_BINARY, C_LIST, C_STRUCT, C_MAP } Shape;

typedef struct Col Col;

/* The columns a row has changed so far, with their lengths before it: a bad row is rolled
   back from here, so a row costs what it touches, not a mark of every column of the plan. */
typedef struct {
    uint64_t gen;        /* the row being decoded */
    Col **log;
    Py_ssize_t n, cap;   /* cap: every column of the plan, each logged once a row at most */
} Undo;

struct Col {
    Shape shape;
    int kind;            /* K_*; of the items for a list */
    int width;           /* bytes per value of a C_FIXED column (4 or 8) */
    int nullable;        /* keeps a validity byte per entry */
    int required;        /* a required field: absent makes the row bad */
    int group;           /* the oneof a member belongs to (decoding it clears the others), or
                            -1 */
    int opaque;          /* a message inside its own type (a binary column): present makes
                            the row bad, so the row path writes its encoding */
    int never;           /* a switch case this path leaves to the row path: always null */
    uint32_t number;
    uint64_t tag, packed_tag;  /* tags the field is read from (packed_tag: 0 if none) */
    /* built entries */
    Py_ssize_t len;
    Buf valid, values, offsets, data;
    /* the entry of the current message (singular fields): last occurrence wins */
    int seen;
    uint64_t bits;
    const uint8_t *str;
    Py_ssize_t str_len;
    /* list items; struct fields */
    Col *items;
    Col **fields;
    Py_ssize_t nfields;
    Col **by_number;     /* field number -> column, for numbers up to max_number */
    uint32_t max_number;
    /* enums: declared numbers, sorted, and the index of each in the names order */
    int32_t *enum_numbers, *enum_index;
    Py_ssize_t nenum;
    /* rollback marks, taken when the current row first changes the column (gen) */
    Py_ssize_t m_len, m_valid, m_values, m_offsets, m_data;
    uint64_t gen;
    Undo *undo;          /* the plan's; owned by its root column (owns_undo) */
    int owns_undo;
};

static void col_free(Col *c) {
    if (c == NULL) return;
    if (c->owns_undo) {
        PyMem_Free(c->undo->log);
        PyMem_Free(c->undo);
    }
    buf_free(&c->valid);
    buf_free(&c->values);
    buf_free(&c->offsets);
    buf_free(&c->data);
    col_free(c->items);
    for (Py_ssize_t i = 0; i < c->nfields; i++) col_free(c->fields[i]);
    PyMem_Free(c->fields);
    PyMem_Free(c->by_number);
    PyMem_Free(c->enum_numbers);
    PyMem_Free(c->enum_index);
    PyMem_Free(c);
}

static int wire_type(int kind) {
    switch (kind) {
    case K_FIXED64: case K_SFIXED64: case K_DOUBLE: return 1;
    case K_STRING: case K_BYTES: case K_MESSAGE: return 2;
    case K_FIXED32: case K_SFIXED32: case K_FLOAT: return 5;
    default: return 0;
    }
}

static Col *col_new(void) {
    Col *c = PyMem_Calloc(1, sizeof(Col));
    if (c == NULL) PyErr_NoMemory();
    return c;
}

static Col *build_struct(PyObject *fields, int depth);

/* A column of values of `kind` (extra: the message's field tuple, or the enum's numbers). */
static Col *build_value(int kind, PyObject *extra, int depth) {
    Col *c = col_new();
    if (c == NULL) return NULL;
    c->kind = kind;
    switch (kind) {
    case K_INT32: case K_SINT32: case K_SFIXED32: case K_FLOAT:
        c->shape = C_FIXED; c->width = 4; break;
    case K_INT64: case K_SINT64: case K_SFIXED64: case K_UINT32: case K_FIXED32: case K_DOUBLE:
        c->shape = C_FIXED; c->width = 8; break;
    case K_UINT64: case K_FIXED64:
        c->shape = C_DECIMAL; break;
    case K_BOOL:
        c->shape = C_BOOL; break;
    case K_STRING: case K_BYTES:
        c->shape = C_BINARY; break;
    case K_ENUM: case K_OPEN_ENUM: {
        c->shape = C_FIXED; c->width = 4;
        if (!PyTuple_Check(extra)) {
            PyErr_SetString(PyExc_TypeError, "an enum column needs a tuple of numbers");
            col_free(c);
            return NULL;
        }
        Py_ssize_t n = PyTuple_GET_SIZE(extra);
        c->enum_numbers = PyMem_Malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
        c->enum_index = PyMem_Malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
        if (c->enum_numbers == NULL || c->enum_index == NULL) {
            PyErr_NoMemory();
            col_free(c);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n; i++) {  /* insertion sort: enums are small */
            long v = PyLong_AsLong(PyTuple_GET_ITEM(extra, i));
            if (v == -1 && PyErr_Occurred()) {
                col_free(c);
                return NULL;
            }
            Py_ssize_t j = i;
            while (j > 0 && c->enum_numbers[j - 1] > (int32_t)v) {
                c->enum_numbers[j] = c->enum_numbers[j - 1];
                c->enum_index[j] = c->enum_index[j - 1];
                j--;
            }
            c->enum_numbers[j] = (int32_t)v;
            c->enum_index[j] = (int32_t)i;
        }
        c->nenum = n;
        break;
    }
    case K_MESSAGE:
        if (extra == Py_None) {  /* held as bytes: always null here (see Col.opaque) */
            c->shape = C_BINARY;
            c->opaque = 1;
            break;
        }
        col_free(c);
        return build_struct(extra, depth + 1);
    default:
        PyErr_Format(PyExc_ValueError, "kind %d has no columnar form", kind);
        col_free(c);
        return NULL;
    }
    return c;
}

/* A struct column from a tuple of (number, kind, mode, nullable, extra) rows. */
static Col *build_struct(PyObject *fields, int depth) {
    if (depth > 64) {
        PyErr_SetString(PyExc_ValueError, "messages nested too deep for a columnar plan");
        return NULL;
    }
    if (!PyTuple_Check(fields)) {
        PyErr_SetString(PyExc_TypeError, "a message plan is a tuple of field rows");
        return NULL;
    }
    Col *s = col_new();
    if (s == NULL) return NULL;
    s->shape = C_STRUCT;
    s->kind = K_MESSAGE;
    s->nfields = PyTuple_GET_SIZE(fields);
    s->fields = PyMem_Calloc((size_t)(s->nfields ? s->nfields : 1), sizeof(Col *));
    if (s->fields == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < s->nfields; i++) {
        unsigned long number;
        int kind, mode, nullable, group = -1;
        PyObject *extra;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, i), "kiipO|i", &number, &kind, &mode,
                              &nullable, &extra, &group))
            goto fail;
        if (number == 0 || number >= (1ul << 29)) {
            PyErr_SetString(PyExc_ValueError, "field number out of range");
            goto fail;
        }
        Col *c;
        if (mode == M_MAP) {  /* extra: the entry's rows, key (1) then value (2) */
            if ((c = col_new()) == NULL) goto fail;
            c->shape = C_MAP;
            c->kind = kind;
            s->fields[i] = c;
            if ((c->items = build_struct(extra, depth + 1)) == NULL) goto fail;
            if (c->items->nfields != 2 || c->items->fields[0]->number != 1
                || c->items->fields[1]->number != 2
                || c->items->fields[0]->shape == C_STRUCT) {
                PyErr_SetString(PyExc_ValueError, "a map entry is a key (1) and a value (2)");
                goto fail;
            }
            kind = K_MESSAGE;  /* entries are read as messages */
        } else if (mode == M_REPEATED || mode == M_PACKED) {
            if ((c = col_new()) == NULL) goto fail;
            c->shape = C_LIST;
            c->kind = kind;
            s->fields[i] = c;
            if ((c->items = build_value(kind, extra, depth)) == NULL) goto fail;
            c->opaque = c->items->opaque;
            if (kind != K_STRING && kind != K_BYTES && kind != K_MESSAGE)
                c->packed_tag = ((uint64_t)number << 3) | 2;
        } else if (mode == M_REQUIRED || mode == M_OPTIONAL || mode == M_IMPLICIT
                   || mode == M_SPARSE || mode == M_ONEOF) {
            if ((c = build_value(kind, extra, depth)) == NULL) goto fail;
            s->fields[i] = c;
            c->required = mode == M_REQUIRED;
        } else {
            PyErr_Format(PyExc_ValueError, "mode %d has no columnar form", mode);
            goto fail;
        }
        c->nullable = nullable;
        c->group = mode == M_ONEOF ? group : -1;
        if (mode == M_ONEOF && (group < 0 || !nullable)) {
            PyErr_SetString(PyExc_ValueError, "a oneof member needs its oneof and is nullable");
            goto fail;
        }
        c->number = (uint32_t)number;
        c->tag = ((uint64_t)number << 3) | (uint64_t)wire_type(kind);
        if (c->number > s->max_number) s->max_number = c->number;
    }
    if (s->max_number <= 4096) {
        s->by_number = PyMem_Calloc((size_t)s->max_number + 1, sizeof(Col *));
        if (s->by_number == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < s->nfields; i++)
            s->by_number[s->fields[i]->number] = s->fields[i];
    }
    return s;
fail:
    col_free(s);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* appending entries */

static Py_ssize_t col_count(const Col *c) {
    Py_ssize_t n = 1 + (c->items ? col_count(c->items) : 0);
    for (Py_ssize_t i = 0; i < c->nfields; i++) n += col_count(c->fields[i]);
    return n;
}

static void col_set_undo(Col *c, Undo *undo) {
    c->undo = undo;
    c->gen = 0;
    if (c->items) col_set_undo(c->items, undo);
    for (Py_ssize_t i = 0; i < c->nfields; i++) col_set_undo(c->fields[i], undo);
}

/* Give a plan's columns their undo log (the root owns it); -1 with MemoryError set. */
static int col_attach_undo(Col *root) {
    Undo *undo = PyMem_Calloc(1, sizeof(Undo));
    if (undo == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    undo->cap = col_count(root);
    undo->log = PyMem_Malloc(sizeof(Col *) * (size_t)undo->cap);
    if (undo->log == NULL) {
        PyMem_Free(undo);
        PyErr_NoMemory();
        return -1;
    }
    col_set_undo(root, undo);
    root->owns_undo = 1;
    return 0;
}

/* Before the current row first changes column c: its lengths, to roll back to. */
static inline void touch(Col *c) {
    Undo *u = c->undo;
    if (c->gen == u->gen) return;
    c->gen = u->gen;
    c->m_len = c->len;
    c->m_valid = c->valid.len;
    c->m_values = c->values.len;
    c->m_offsets = c->offsets.len;
    c->m_data = c->data.len;
    u->log[u->n++] = c;  /* within cap: a column is logged once a row */
}

static void undo_begin(Undo *u) {
    u->gen++;
    u->n = 0;
}

static void undo_rollback(Undo *u) {
    for (Py_ssize_t i = 0; i < u->n; i++) {
        Col *c = u->log[i];
        c->len = c->m_len;
        c->valid.len = c->m_valid;
        c->values.len = c->m_values;
        c->offsets.len = c->m_offsets;
        c->data.len = c->m_data;
    }
    u->n = 0;
}

/* Offsets start with a 0 for the first entry. */
static int col_start(Col *c) {
    if (c->shape == C_BINARY || c->shape == C_LIST || c->shape == C_MAP)
        if (buf_i32(&c->offsets, 0) < 0) return -1;
    if (c->items && col_start(c->items) < 0) return -1;
    for (Py_ssize_t i = 0; i < c->nfields; i++)
        if (col_start(c->fields[i]) < 0) return -1;
    return 0;
}

static inline int put_valid(Col *c, int valid) {
    if (!c->nullable) return 0;
    char v = (char)valid;
    return buf_put(&c->valid, &v, 1);
}

/* Append the entry held in c->seen/bits/str: a value, or (not seen) a null or the zero
   value, which is also what stands below a null struct. */
static int col_commit_value(Col *c) {
    touch(c);
    switch (c->shape) {
    case C_FIXED:
        if (c->width == 4) {
            int32_t v = c->seen ? (int32_t)(uint32_t)c->bits : 0;
            if (buf_put(&c->values, &v, 4) < 0) return -1;
        } else if (c->width < 4) {  /* a frame's int8 or int16: the low bytes (little-endian) */
            uint64_t v = c->seen ? c->bits : 0;
            if (buf_put(&c->values, &v, c->width) < 0) return -1;
        } else {
            uint64_t v = c->seen ? c->bits : 0;
            if (buf_put(&c->values, &v, 8) < 0) return -1;
        }
        break;
    case C_BOOL: {
        char v = (char)(c->seen && c->bits != 0);
        if (buf_put(&c->values, &v, 1) < 0) return -1;
        break;
    }
    case C_DECIMAL: {
        uint64_t v[2] = {c->seen ? c->bits : 0, 0};
        if (buf_put(&c->values, v, 16) < 0) return -1;
        break;
    }
    case C_BINARY:
        if (c->seen && buf_put(&c->data, c->str, c->str_len) < 0) return -1;
        if (c->data.len > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "a column's data passed 2 GiB");
            return -1;
        }
        if (buf_i32(&c->offsets, (int32_t)c->data.len) < 0) return -1;
        break;
    default:
        break;
    }
    if (put_valid(c, c->seen) < 0) return -1;
    c->len++;
    return 0;
}

/* Append k null entries (placeholders where the column is not nullable: zero, empty) in
   bulk. A struct's fields are not touched: they lag behind it, their missing entries being
   nulls too, and catch up when the struct next gets a value, or at the end (col_result).
   So a message that is absent costs one entry, not one per column of its whole subtree
   (a Pulsar command has some seventy absent bodies and 600 columns). */
static int col_pad(Col *c, Py_ssize_t k) {
    if (k <= 0) return 0;
    touch(c);
    if (c->nullable) {
        if (buf_reserve(&c->valid, k) < 0) return -1;
        memset(c->valid.p + c->valid.len, 0, (size_t)k);
        c->valid.len += k;
    }
    Py_ssize_t width = 0;
    switch (c->shape) {
    case C_FIXED: width = c->width; break;
    case C_BOOL: width = 1; break;
    case C_DECIMAL: width = 16; break;
    case C_BINARY: case C_LIST: case C_MAP: {
        if (buf_reserve(&c->offsets, 4 * k) < 0) return -1;
        int32_t last = ((const int32_t *)c->offsets.p)[c->offsets.len / 4 - 1];
        int32_t *o = (int32_t *)(c->offsets.p + c->offsets.len);
        for (Py_ssize_t i = 0; i < k; i++) o[i] = last;
        c->offsets.len += 4 * k;
        break;
    }
    case C_STRUCT:
        break;
    }
    if (width) {
        if (buf_reserve(&c->values, width * k) < 0) return -1;
        memset(c->values.p + c->values.len, 0, (size_t)(width * k));
        c->values.len += width * k;
    }
    c->len += k;
    return 0;
}

/* Bring a struct's field `c` up to the struct's `n` entries before it gets the next. */
static inline int col_catch_up(Col *c, Py_ssize_t n) {
    return c->len < n ? col_pad(c, n - c->len) : 0;
}

/* A null (or, where not nullable, a placeholder) entry of any column. */
static inline int col_null(Col *c) {
    return col_pad(c, 1);
}

/* ------------------------------------------------------------------------------------------ */
/* reading the wire */

enum { OK = 0, BAD = 1, ERR = -1 };  /* ERR: a Python exception is set */

static inline int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end) return BAD;
        uint8_t b = *p++;
        if (shift < 64) v |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *pp = p;
            *out = v;
            return OK;
        }
    }
    return BAD;  /* more than ten bytes */
}

/* Strict UTF-8, as bytes.decode() accepts it: no overlong forms, surrogates or values past
   U+10FFFF. */
static int valid_utf8(const uint8_t *s, Py_ssize_t n) {
    const uint8_t *end = s + n;
    while (s < end) {
        uint8_t c = *s;
        if (c < 0x80) {
            s++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (end - s < 2 || (s[1] & 0xC0) != 0x80) return 0;
            s += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (end - s < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && s[1] < 0xA0) return 0;
            if (c == 0xED && s[1] >= 0xA0) return 0;
            s += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (end - s < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80
                || (s[3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && s[1] < 0x90) return 0;
            if (c == 0xF4 && s[1] >= 0x90) return 0;
            s += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* One scalar value of `c->kind` at *pp into *out (the bits of the Arrow value). */
static int read_scalar(const Col *c, const uint8_t **pp, const uint8_t *end, uint64_t *out) {
    uint64_t v;
    switch (c->kind) {
    case K_FIXED64: case K_SFIXED64: case K_DOUBLE:
        if (end - *pp < 8) return BAD;
        memcpy(&v, *pp, 8);  /* little-endian hosts, as Arrow's buffers */
        *pp += 8;
        *out = v;
        return OK;
    case K_FIXED32: case K_SFIXED32: case K_FLOAT: {
        uint32_t w;
        if (end - *pp < 4) return BAD;
        memcpy(&w, *pp, 4);
        *pp += 4;
        *out = w;  /* fixed32: an int64 column; sfixed32 and float keep their 32 bits */
        return OK;
    }
    default:
        break;
    }
    if (read_varint(pp, end, &v) != OK) return BAD;
    switch (c->kind) {
    case K_INT32:
        *out = (uint32_t)v;  /* the low 32 bits, reinterpreted as signed on commit */
        return OK;
    case K_UINT32:
        *out = v & 0xFFFFFFFFu;
        return OK;
    case K_SINT32: {
        uint32_t w = (uint32_t)v;  /* the runtimes keep the low 32 bits */
        *out = (uint32_t)((w >> 1) ^ (0u - (w & 1)));
        return OK;
    }
    case K_SINT64:
        *out = (v >> 1) ^ (0 - (v & 1));
        return OK;
    case K_ENUM: case K_OPEN_ENUM: {
        int32_t number = (int32_t)(uint32_t)v;
        Py_ssize_t lo = 0, hi = c->nenum;
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (c->enum_numbers[mid] < number) lo = mid + 1;
            else hi = mid;
        }
        if (lo == c->nenum || c->enum_numbers[lo] != number) return BAD;  /* row path */
        *out = (uint32_t)c->enum_index[lo];
        return OK;
    }
    default:  /* int64, uint64, bool */
        *out = v;
        return OK;
    }
}

static int skip_field(const uint8_t **pp, const uint8_t *end, uint64_t tag) {
    uint64_t n;
    if (tag >> 3 == 0) return BAD;
    switch (tag & 7) {
    case 0:
        return read_varint(pp, end, &n);
    case 1:
        if (end - *pp < 8) return BAD;
        *pp += 8;
        return OK;
    case 2:
        if (read_varint(pp, end, &n) != OK || n > (uint64_t)(end - *pp)) return BAD;
        *pp += n;
        return OK;
    case 5:
        if (end - *pp < 4) return BAD;
        *pp += 4;
        return OK;
    default:
        return BAD;  /* groups and invalid wire types: the row path decides */
    }
}

/* Append one item to a list's items column. */
static int add_item(Col *items, const uint8_t **pp, const uint8_t *end, int depth);

static int decode_message(Col *s, const uint8_t *p, const uint8_t *end, int depth);

static int add_item(Col *items, const uint8_t **pp, const uint8_t *end, int depth) {
    if (items->shape == C_STRUCT || items->shape == C_BINARY) {
        uint64_t n;
        if (read_varint(pp, end, &n) != OK || n > (uint64_t)(end - *pp)) return BAD;
        const uint8_t *start = *pp;
        *pp += n;
        if (items->shape == C_STRUCT) return decode_message(items, start, start + n, depth + 1);
        if (items->kind == K_STRING && !valid_utf8(start, (Py_ssize_t)n)) return BAD;
        items->seen = 1;
        items->str = start;
        items->str_len = (Py_ssize_t)n;
        return col_commit_value(items) < 0 ? ERR : OK;
    }
    int r = read_scalar(items, pp, end, &items->bits);
    if (r != OK) return r;
    items->seen = 1;
    return col_commit_value(items) < 0 ? ERR : OK;
}

/* Whether the entry just added to map column `m` repeats the key of an earlier entry of the
   same map (the entries from the map's start offset on). */
static int repeated_key(const Col *m) {
    const Col *keys = m->items->fields[0];
    Py_ssize_t first = ((const int32_t *)m->offsets.p)[m->offsets.len / 4 - 1];
    Py_ssize_t last = keys->len - 1;
    for (Py_ssize_t i = first; i < last; i++) {
        switch (keys->shape) {
        case C_BINARY: {
            const int32_t *o = (const int32_t *)keys->offsets.p;
            if (o[i + 1] - o[i] == o[last + 1] - o[last]
                && memcmp(keys->data.p + o[i], keys->data.p + o[last],
                          (size_t)(o[i + 1] - o[i])) == 0)
                return 1;
            break;
        }
        case C_BOOL:
            if (keys->values.p[i] == keys->values.p[last]) return 1;
            break;
        case C_DECIMAL:
            if (memcmp(keys->values.p + 16 * i, keys->values.p + 16 * last, 16) == 0) return 1;
            break;
        default:
            if (memcmp(keys->values.p + keys->width * i, keys->values.p + keys->width * last,
                       (size_t)keys->width) == 0)
                return 1;
            break;
        }
    }
    return 0;
}

/* A member of a oneof is about to be decoded: the others of its oneof become unset. One
   that is a message already holds its entry, which cannot be taken back: BAD. */
static int clear_oneof(Col *s, const Col *member) {
    for (Py_ssize_t i = 0; i < s->nfields; i++) {
        Col *other = s->fields[i];
        if (other == member || other->group != member->group || !other->seen) continue;
        if (other->shape == C_STRUCT) return BAD;
        other->seen = 0;
    }
    return OK;
}

/* Decode one message into the next entry of struct column `s`; OK, BAD or ERR. On BAD the
   caller rolls the whole row back. */
static int decode_message(Col *s, const uint8_t *p, const uint8_t *end, int depth) {
    if (depth > 100) return BAD;  /* the row path's recursion limit decides */
    Py_ssize_t at = s->len;  /* the entry being decoded; the fields catch up to it */
    for (Py_ssize_t i = 0; i < s->nfields; i++) s->fields[i]->seen = 0;
    while (p < end) {
        uint64_t tag;
        if (read_varint(&p, end, &tag) != OK) return BAD;
        uint64_t number = tag >> 3;
        Col *c = NULL;
        if (s->by_number != NULL) {
            if (number <= s->max_number) c = s->by_number[number];
        } else {
            for (Py_ssize_t i = 0; i < s->nfields; i++)
                if (s->fields[i]->number == number) c = s->fields[i];
        }
        int r;
        if (c == NULL || (tag != c->tag && (c->packed_tag == 0 || tag != c->packed_tag))) {
            r = skip_field(&p, end, tag);  /* an unknown field (or a known one of another
                                              wire type, which the row path keeps unknown) */
        } else if (c->opaque) {
            return BAD;
        } else if (c->group >= 0 && clear_oneof(s, c) != OK) {
            return BAD;
        } else if (c->shape == C_MAP) {
            uint64_t n;
            if (read_varint(&p, end, &n) != OK || n > (uint64_t)(end - p)) return BAD;
            r = decode_message(c->items, p, p + n, depth + 1);
            p += n;
            if (r == OK && repeated_key(c)) return BAD;  /* the row path keeps the last */
        } else if (c->shape == C_LIST) {
            if (tag == c->packed_tag) {
                uint64_t n;
                if (read_varint(&p, end, &n) != OK || n > (uint64_t)(end - p)) return BAD;
                const uint8_t *pend = p + n;
                r = OK;
                while (r == OK && p < pend) r = add_item(c->items, &p, pend, depth);
                if (r == OK && p != pend) r = BAD;
            } else {
                r = add_item(c->items, &p, end, depth);
            }
        } else if (c->shape == C_STRUCT) {
            uint64_t n;
            if (c->seen) return BAD;  /* a second occurrence: the row path decides */
            if (read_varint(&p, end, &n) != OK || n > (uint64_t)(end - p)) return BAD;
            if (col_catch_up(c, at) < 0) return ERR;
            r = decode_message(c, p, p + n, depth + 1);
            p += n;
            c->seen = 1;
        } else if (c->shape == C_BINARY) {
            uint64_t n;
            if (read_varint(&p, end, &n) != OK || n > (uint64_t)(end - p)) return BAD;
            if (c->kind == K_STRING && !valid_utf8(p, (Py_ssize_t)n)) return BAD;
            c->str = p;
            c->str_len = (Py_ssize_t)n;
            c->seen = 1;
            p += n;
            r = OK;
        } else {
            r = read_scalar(c, &p, end, &c->bits);
            c->seen = 1;
        }
        if (r != OK) return r;
    }
    for (Py_ssize_t i = 0; i < s->nfields; i++) {
        Col *c = s->fields[i];
        if (c->required && !c->seen) return BAD;
        if (c->shape == C_STRUCT) continue;  /* decoded above, or absent: it lags */
        if (col_catch_up(c, at) < 0) return ERR;
        if (c->shape == C_LIST || c->shape == C_MAP) {
            touch(c);
            if (buf_i32(&c->offsets, (int32_t)c->items->len) < 0) return ERR;
            if (put_valid(c, 1) < 0) return ERR;
            c->len++;
        } else if (col_commit_value(c) < 0) {
            return ERR;
        }
    }
    touch(s);
    if (put_valid(s, 1) < 0) return ERR;
    s->len++;
    return OK;
}

/* ------------------------------------------------------------------------------------------ */
/* results */

static PyObject *bytes_of(const Buf *b) {
    return PyBytes_FromStringAndSize(b->len ? b->p : "", b->len);
}

/* Validity bytes -> an Arrow bitmap (LSB first), or None when the column keeps none. */
static PyObject *bitmap_of(const Buf *bytes, Py_ssize_t len) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, (len + 7) / 8);
    if (out == NULL) return NULL;
    uint8_t *bits = (uint8_t *)PyBytes_AS_STRING(out);
    memset(bits, 0, (size_t)(len + 7) / 8);
    for (Py_ssize_t i = 0; i < len; i++)
        if (bytes->p[i]) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    return out;
}

/* A column of `want` entries as Python builds it: (length, validity bitmap or None,
   buffers...) with buffers: values (fixed, decimal), a bitmap of values (bool), offsets +
   data (binary), offsets + the items' column (list), a list of the fields' columns (struct);
   or (length,) for a column of nothing but nulls (placeholders where not nullable), which
   Python builds without buffers from here. */
static PyObject *col_result(Col *c, Py_ssize_t want) {
    if ((c->len == 0 && want > 0) || c->never) return Py_BuildValue("(n)", want);
    if (col_catch_up(c, want) < 0) return NULL;
    PyObject *valid = c->nullable ? bitmap_of(&c->valid, c->len) : Py_NewRef(Py_None);
    if (valid == NULL) return NULL;
    PyObject *a = NULL, *b = NULL;
    switch (c->shape) {
    case C_FIXED: case C_DECIMAL:
        a = bytes_of(&c->values);
        break;
    case C_BOOL:
        a = bitmap_of(&c->values, c->len);
        break;
    case C_BINARY:
        a = bytes_of(&c->offsets);
        b = bytes_of(&c->data);
        if (b == NULL) Py_CLEAR(a);
        break;
    case C_LIST: case C_MAP:
        a = bytes_of(&c->offsets);
        b = col_result(c->items, c->items->len);
        if (b == NULL) Py_CLEAR(a);
        break;
    case C_STRUCT:
        a = PyList_New(c->nfields);
        for (Py_ssize_t i = 0; a != NULL && i < c->nfields; i++) {
            PyObject *child = col_result(c->fields[i], c->len);
            if (child == NULL) Py_CLEAR(a);
            else PyList_SET_ITEM(a, i, child);
        }
        break;
    }
    if (a == NULL) {
        Py_DECREF(valid);
        return NULL;
    }
    PyObject *out = b == NULL ? Py_BuildValue("(nNN)", c->len, valid, a)
                              : Py_BuildValue("(nNNN)", c->len, valid, a, b);
    return out;
}

static void col_reset(Col *c) {
    c->len = 0;
    c->valid.len = c->values.len = c->offsets.len = c->data.len = 0;
    if (c->items) col_reset(c->items);
    for (Py_ssize_t i = 0; i < c->nfields; i++) col_reset(c->fields[i]);
}

/* Release the buffers' memory (a plan keeps none between calls). */
static void col_release(Col *c) {
    buf_free(&c->valid);
    buf_free(&c->values);
    buf_free(&c->offsets);
    buf_free(&c->data);
    c->len = 0;
    if (c->items) col_release(c->items);
    for (Py_ssize_t i = 0; i < c->nfields; i++) col_release(c->fields[i]);
}

/* ------------------------------------------------------------------------------------------ */
/* the Plan type */

typedef struct {
    PyObject_HEAD
    Col *root;
    int busy;
} PlanObject;

static int plan_init(PlanObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *fields;
    if (!PyArg_ParseTuple(args, "O!:Plan", &PyTuple_Type, &fields)) return -1;
    Col *root = build_struct(fields, 0);
    if (root == NULL) return -1;
    if (col_attach_undo(root) < 0) {
        col_free(root);
        return -1;
    }
    root->nullable = 1;
    col_free(self->root);
    self->root = root;
    return 0;
}

static void plan_dealloc(PlanObject *self) {
    col_free(self->root);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* One row's value into the next entry of `root`: OK, BAD (rolled back, left to the row
   path) or ERR. */
typedef int (*RowDecoder)(void *ctx, const uint8_t *p, const uint8_t *end);

/* decode(offsets, data, validity, offset, length) -> (column, bad rows), for Plan and
   FramePlan. offsets: the int32 offsets buffer of an Arrow binary array, data: its data
   buffer, validity: its validity bitmap or None, offset and length: the array's. */
static PyObject *decode_run(PyObject *args, Col *root, int *busy, RowDecoder one, void *ctx) {
    Py_buffer offsets = {0}, data = {0}, validity = {0};
    PyObject *validity_obj;
    Py_ssize_t offset, length;
    if (root == NULL) {
        PyErr_SetString(PyExc_ValueError, "the plan was not initialized");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*y*Onn:decode", &offsets, &data, &validity_obj, &offset,
                          &length))
        return NULL;
    PyObject *result = NULL, *bad = NULL;
    int has_validity = validity_obj != Py_None;
    if (has_validity && PyObject_GetBuffer(validity_obj, &validity, PyBUF_SIMPLE) < 0)
        goto done;
    if (offset < 0 || length < 0 || offsets.len / 4 < offset + length + 1
        || (has_validity && validity.len * 8 < offset + length)) {
        PyErr_SetString(PyExc_ValueError, "buffers too short for offset and length");
        goto done;
    }
    if (*busy) {
        PyErr_SetString(PyExc_RuntimeError, "decode is already running in this plan");
        goto done;
    }
    if ((bad = PyList_New(0)) == NULL) goto done;
    *busy = 1;
    col_reset(root);
    const int32_t *offs = (const int32_t *)offsets.buf + offset;
    const uint8_t *base = (const uint8_t *)data.buf;
    const uint8_t *vbits = (const uint8_t *)validity.buf;
    int failed = col_start(root) < 0;
    for (Py_ssize_t i = 0; !failed && i < length; i++) {
        Py_ssize_t bit = offset + i;
        int32_t lo = offs[i], hi = offs[i + 1];
        if (has_validity && !(vbits[bit >> 3] & (1u << (bit & 7)))) {
            failed = col_null(root) < 0;
            continue;
        }
        if (lo < 0 || hi < lo || hi > data.len) {
            PyErr_SetString(PyExc_ValueError, "offsets outside the data buffer");
            failed = 1;
            break;
        }
        undo_begin(root->undo);
        int r = one(ctx, base + lo, base + hi);
        if (r == ERR) {
            failed = 1;
        } else if (r == BAD) {
            undo_rollback(root->undo);
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(bad, index) < 0) failed = 1;
            Py_XDECREF(index);
            if (!failed) failed = col_null(root) < 0;
        }
    }
    if (!failed) {
        PyObject *column = col_result(root, root->len);
        if (column != NULL) result = Py_BuildValue("(NO)", column, bad);
    }
    col_release(root);
    *busy = 0;
done:
    Py_XDECREF(bad);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    if (has_validity) PyBuffer_Release(&validity);
    return result;
}

static int message_row(void *root, const uint8_t *p, const uint8_t *end) {
    return decode_message((Col *)root, p, end, 0);
}

static PyObject *plan_decode(PlanObject *self, PyObject *args) {
    return decode_run(args, self->root, &self->busy, message_row, self->root);
}

static PyMethodDef plan_methods[] = {
    {"decode", (PyCFunction)plan_decode, METH_VARARGS,
     "decode(offsets, data, validity, offset, length) -> (column buffers, bad row indices)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protoframe.runtime.codec._columnar.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A columnar decoder of one message type: Plan(fields).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_methods = plan_methods,
};

/* ------------------------------------------------------------------------------------------ */
/* frames: a run of whole frames of one frame struct (runtime/spark/columnar_frames.py)

   A frame struct is a struct column whose fields are filled by steps, one per row of the
   struct's layout table (runtime/codec/compiled_frames.py) that this path knows: sizes,
   constants, checksums, sized protobuf messages (decoded by decode_message above), bytes,
   integers, bools, uuids, prefixed bytes and text, nested structs and runs of them, and a
   switch: a struct column of one field per case, the case's struct filled and the others
   lagging (null), as a message's absent fields do. As for messages, anything the generated
   decoder would raise on, or that this path is not sure to read as it does (a checksum that
   does not match, which the row path returns with its error; a command without its body;
   a switch case planned as NULL), makes the whole row bad. */

enum { F_SIZE_REST = 1, F_SIZE, F_CONST, F_CHECKSUM, F_PROTO, F_BYTES, F_STRUCT, F_INT,
       F_BOOL, F_UUID, F_PREFIXED, F_DEFAULT, F_SKIP, F_RUN, F_SWITCH_KEY, F_SWITCH,
       F_PROTO_PREFIXED, F_STRUCT_WHEN, F_BLOCKS, F_COUNT, F_ARRAY, F_LEN_VALUE, F_INT_WHEN,
       F_DEFAULT_BOOL };
/* a row there when an integer field of an earlier message row compares to a value (W_EQ,
   W_NE), or when the length of an earlier bytes row does (any) */
enum { W_ALWAYS = 0, W_EQ = 1, W_NE = 2, W_GT = 3, W_GE = 4, W_LT = 5, W_LE = 6 };
enum { P_ALWAYS = 0, P_REMAINING = 1, P_PEEK = 2 };
/* F_PREFIXED: what the bytes are (number), and whether they are always there (at) */
enum { T_BYTES = 0, T_UTF8 = 1, T_MUTF8 = 2 };
enum { X_ALWAYS = 0, X_DEFAULT = 1, X_OPTIONAL = 2 };
#define F_MAX_STEPS 64  /* sizes are kept per step on the C stack */

typedef struct FNode FNode;
typedef struct FStep FStep;
struct FStep {
    int op;
    int width, is_signed, big;  /* the stored integer of a size, constant, checksum, peek */
    int at;               /* F_SIZE: the step it sizes; F_BYTES: -1 for the rest;
                             F_STRUCT: its presence (P_*); F_PREFIXED: X_*; F_SWITCH: 1 when
                             a size step sizes it */
    uint64_t number;      /* F_CONST, a peek: the value expected (as read, unsigned);
                             F_DEFAULT: the default (two's complement); F_PREFIXED: T_* */
    Py_ssize_t child;     /* the struct's field the step fills, or -1 */
    PyObject *checksum;   /* F_CHECKSUM: the function, data -> int; F_PREFIXED: the default
                             (bytes) */
    FNode *node;          /* F_STRUCT, F_RUN: the nested struct */
    /* F_SWITCH: the cases by key (sorted), each the node of its struct or NULL (left to the
       row path) */
    int64_t *keys;
    FNode **cases;
    Py_ssize_t ncases;
    /* F_PROTO_PREFIXED, F_STRUCT_WHEN: there when field when_field of the message of step
       when_step (as the column holds it) compares to when_bits by when_op (W_*) */
    int when_op;
    Py_ssize_t when_step, when_field;
    uint64_t when_bits;
    /* F_BLOCKS: the block length's integer, the most bytes a block holds and the most
       blocks (0: no limit) */
    FStep *block;
    uint64_t block_max, blocks_max;
    Py_ssize_t type_field;  /* F_PROTO of a command envelope: its type field, else -1 */
    int32_t *body_of;     /* the type's enum index -> its body field, or -1 (no body) */
    Py_ssize_t nbody;
};

struct FNode {
    Col *col;
    FStep *steps;
    Py_ssize_t nsteps;
    int check_end;
};

static void fnode_free(FNode *n) {
    if (n == NULL) return;
    for (Py_ssize_t i = 0; i < n->nsteps; i++) {
        Py_XDECREF(n->steps[i].checksum);
        PyMem_Free(n->steps[i].body_of);
        fnode_free(n->steps[i].node);
        for (Py_ssize_t k = 0; k < n->steps[i].ncases; k++) fnode_free(n->steps[i].cases[k]);
        PyMem_Free(n->steps[i].cases);
        PyMem_Free(n->steps[i].keys);
        PyMem_Free(n->steps[i].block);
    }
    PyMem_Free(n->steps);
    PyMem_Free(n);  /* n->col belongs to its parent column (or the plan) */
}

/* A frame struct node from (check_end, nullable flags of its fields, steps), each step
   (op, width, signed, big, at, number, child, extra). */
static FNode *build_frame(PyObject *spec, int depth) {
    int check_end;
    PyObject *nullables, *steps;
    if (depth > 32) {
        PyErr_SetString(PyExc_ValueError, "frame structs nested too deep for a columnar plan");
        return NULL;
    }
    if (!PyArg_ParseTuple(spec, "pO!O!:frame", &check_end, &PyTuple_Type, &nullables,
                          &PyTuple_Type, &steps))
        return NULL;
    if (PyTuple_GET_SIZE(steps) > F_MAX_STEPS) {
        PyErr_SetString(PyExc_ValueError, "a frame struct of too many rows");
        return NULL;
    }
    FNode *n = PyMem_Calloc(1, sizeof(FNode));
    if (n == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    n->check_end = check_end;
    Col *s = n->col = col_new();
    if (s == NULL) goto fail;
    s->shape = C_STRUCT;
    s->kind = K_MESSAGE;
    s->nfields = PyTuple_GET_SIZE(nullables);
    s->fields = PyMem_Calloc((size_t)(s->nfields ? s->nfields : 1), sizeof(Col *));
    n->steps = PyMem_Calloc((size_t)(PyTuple_GET_SIZE(steps) ? PyTuple_GET_SIZE(steps) : 1),
                            sizeof(FStep));
    if (s->fields == NULL || n->steps == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    char sized[F_MAX_STEPS] = {0};
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(steps); i++) {
        FStep *st = &n->steps[i];
        unsigned long long number;
        PyObject *extra;
        st->type_field = -1;
        n->nsteps = i + 1;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(steps, i), "iiiiiKnO:step", &st->op, &st->width,
                              &st->is_signed, &st->big, &st->at, &number, &st->child, &extra))
            goto fail;
        st->number = number;
        if (st->width < 0 || st->width > 8 || st->child < -1 || st->child >= s->nfields
            || (st->child >= 0 && s->fields[st->child] != NULL)) {
            PyErr_SetString(PyExc_ValueError, "a frame step out of range");
            goto fail;
        }
        int stored = st->op == F_PROTO || st->op == F_BYTES || st->op == F_STRUCT
                     || st->op == F_INT || st->op == F_BOOL || st->op == F_UUID
                     || st->op == F_PREFIXED || st->op == F_DEFAULT || st->op == F_RUN
                     || st->op == F_SWITCH || st->op == F_PROTO_PREFIXED
                     || st->op == F_STRUCT_WHEN || st->op == F_BLOCKS || st->op == F_ARRAY
                     || st->op == F_INT_WHEN || st->op == F_DEFAULT_BOOL;
        if (stored != (st->child >= 0)) {
            PyErr_SetString(PyExc_ValueError, "a stored step names its field, no other does");
            goto fail;
        }
        Col *c = NULL;
        switch (st->op) {
        case F_SIZE: case F_COUNT:
            if (st->at <= i || st->at >= PyTuple_GET_SIZE(steps)) {
                PyErr_SetString(PyExc_ValueError, "a size step sizes a later step");
                goto fail;
            }
            sized[st->at] = 1;
            break;
        case F_LEN_VALUE:
            break;
        case F_ARRAY:
            if ((c = col_new()) == NULL) goto fail;
            s->fields[st->child] = c;
            c->shape = C_LIST;
            c->kind = K_MESSAGE;
            if ((st->node = build_frame(extra, depth + 1)) == NULL) goto fail;
            c->items = st->node->col;
            break;
        case F_INT_WHEN: {  /* extra: (arrow width, (bytes step, W_*, value)) */
            long arrow_width;
            long long value;
            if (!PyArg_ParseTuple(extra, "l(niL):int_when", &arrow_width, &st->when_step,
                                  &st->when_op, &value))
                goto fail;
            st->when_bits = (uint64_t)value;
            if ((arrow_width != 1 && arrow_width != 2 && arrow_width != 4 && arrow_width != 8)
                || st->width == 0 || st->width + !st->is_signed > arrow_width
                || st->when_step < 0 || st->when_step >= i || st->when_op < W_EQ
                || st->when_op > W_LE
                || (n->steps[st->when_step].op != F_BYTES
                    && n->steps[st->when_step].op != F_PREFIXED)) {
                PyErr_SetString(PyExc_ValueError, "an int_when step out of range");
                goto fail;
            }
            if ((c = col_new()) == NULL) goto fail;
            s->fields[st->child] = c;
            c->shape = C_FIXED;
            c->kind = K_INT64;
            c->width = (int)arrow_width;
            break;
        }
        case F_DEFAULT_BOOL:
            if (st->width != 1 || st->number > 1) {
                PyErr_SetString(PyExc_ValueError, "a bool step reads one byte");
                goto fail;
            }
            if ((c = build_value(K_BOOL, Py_None, depth)) == NULL) goto fail;
            s->fields[st->child] = c;
            break;
        case F_SIZE_REST: case F_CONST:
            break;
        case F_CHECKSUM:
            if (!PyCallable_Check(extra)) {
                PyErr_SetString(PyExc_TypeError, "a checksum step needs its function");
                goto fail;
            }
            st->checksum = Py_NewRef(extra);
            break;
        case F_PROTO: {
            PyObject *rows, *body;
            if (!PyArg_ParseTuple(extra, "O!nO!:proto", &PyTuple_Type, &rows, &st->type_field,
                                  &PyTuple_Type, &body))
                goto fail;
            if ((c = build_struct(rows, 0)) == NULL) goto fail;
            s->fields[st->child] = c;
            st->nbody = PyTuple_GET_SIZE(body);
            if (st->type_field >= c->nfields
                || (st->type_field >= 0 && c->fields[st->type_field]->kind != K_ENUM)) {
                PyErr_SetString(PyExc_ValueError, "an envelope's type is an enum field");
                goto fail;
            }
            st->body_of = PyMem_Malloc(sizeof(int32_t) * (size_t)(st->nbody ? st->nbody : 1));
            if (st->body_of == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            for (Py_ssize_t k = 0; k < st->nbody; k++) {
                long v = PyLong_AsLong(PyTuple_GET_ITEM(body, k));
                if (v == -1 && PyErr_Occurred()) goto fail;
                if (v < -1 || v >= c->nfields) {
                    PyErr_SetString(PyExc_ValueError, "a body field out of range");
                    goto fail;
                }
                st->body_of[k] = (int32_t)v;
            }
            break;
        }
        case F_BYTES:
            if ((c = build_value(K_BYTES, Py_None, depth)) == NULL) goto fail;
            s->fields[st->child] = c;
            break;
        case F_STRUCT:
            if ((st->node = build_frame(extra, depth + 1)) == NULL) goto fail;
            c = st->node->col;
            s->fields[st->child] = c;
            break;
        case F_INT: case F_DEFAULT: {  /* extra: the bytes of the column's Arrow integer */
            long arrow_width = PyLong_AsLong(extra);
            if (arrow_width == -1 && PyErr_Occurred()) goto fail;
            if ((arrow_width != 1 && arrow_width != 2 && arrow_width != 4 && arrow_width != 8)
                || st->width == 0 || st->width + !st->is_signed > arrow_width) {
                PyErr_SetString(PyExc_ValueError, "an integer step's column is too narrow");
                goto fail;
            }
            if ((c = col_new()) == NULL) goto fail;
            s->fields[st->child] = c;
            c->shape = C_FIXED;
            c->kind = K_INT64;
            c->width = (int)arrow_width;
            break;
        }
        case F_BOOL:
            if (st->width != 1) {
                PyErr_SetString(PyExc_ValueError, "a bool step reads one byte");
                goto fail;
            }
            if ((c = build_value(K_BOOL, Py_None, depth)) == NULL) goto fail;
            s->fields[st->child] = c;
            break;
        case F_UUID:
            if ((c = build_value(K_STRING, Py_None, depth)) == NULL) goto fail;
            s->fields[st->child] = c;
            break;
        case F_PREFIXED:
            if (st->width == 0 || st->number > T_MUTF8 || st->at < X_ALWAYS
                || st->at > X_OPTIONAL || (st->at == X_DEFAULT && !PyBytes_Check(extra))) {
                PyErr_SetString(PyExc_ValueError, "a prefixed step out of range");
                goto fail;
            }
            if (st->at == X_DEFAULT) st->checksum = Py_NewRef(extra);
            if ((c = build_value(st->number == T_BYTES ? K_BYTES : K_STRING, Py_None, depth))
                == NULL)
                goto fail;
            s->fields[st->child] = c;
            break;
        case F_SKIP: case F_SWITCH_KEY:
            break;
        case F_PROTO_PREFIXED: case F_STRUCT_WHEN: {
            /* extra: (message rows or struct spec, None or (step, field, bits, W_EQ/W_NE)) */
            PyObject *inner, *when;
            if (!PyArg_ParseTuple(extra, "OO:when", &inner, &when)) goto fail;
            if (when != Py_None) {
                unsigned long long bits;
                if (!PyArg_ParseTuple(when, "nnKi:condition", &st->when_step, &st->when_field,
                                      &bits, &st->when_op))
                    goto fail;
                st->when_bits = bits;
                const FStep *by = st->when_step >= 0 && st->when_step < i
                                  ? &n->steps[st->when_step] : NULL;
                Col *m = by != NULL && by->op == F_PROTO_PREFIXED && by->when_op == W_ALWAYS
                         ? s->fields[by->child] : NULL;
                if (m == NULL || st->when_field < 0 || st->when_field >= m->nfields
                    || !m->fields[st->when_field]->required
                    || (m->fields[st->when_field]->shape != C_FIXED
                        && m->fields[st->when_field]->shape != C_BOOL)
                    || (st->when_op != W_EQ && st->when_op != W_NE)) {
                    PyErr_SetString(PyExc_ValueError,
                                    "a condition reads a required integer of an earlier message");
                    goto fail;
                }
            }
            if (st->op == F_PROTO_PREFIXED) {
                if ((c = build_struct(inner, 0)) == NULL) goto fail;
                s->fields[st->child] = c;
            } else {
                if ((st->node = build_frame(inner, depth + 1)) == NULL) goto fail;
                c = st->node->col;
                s->fields[st->child] = c;
            }
            break;
        }
        case F_BLOCKS: {  /* extra: (spec, block width, signed, big, most bytes, most blocks) */
            PyObject *inner;
            int bwidth, bsigned, bbig;
            unsigned long long bmax, cmax;
            if (!PyArg_ParseTuple(extra, "OiiiKK:blocks", &inner, &bwidth, &bsigned, &bbig,
                                  &bmax, &cmax))
                goto fail;
            if (st->width == 0 || bwidth <= 0 || bwidth > 8) {
                PyErr_SetString(PyExc_ValueError, "blocks need their integers");
                goto fail;
            }
            if ((st->block = PyMem_Calloc(1, sizeof(FStep))) == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            st->block->width = bwidth;
            st->block->is_signed = bsigned;
            st->block->big = bbig;
            st->block_max = bmax;
            st->blocks_max = cmax;
            if ((st->node = build_frame(inner, depth + 1)) == NULL) goto fail;
            c = st->node->col;
            s->fields[st->child] = c;
            break;
        }
        case F_RUN:
            if ((c = col_new()) == NULL) goto fail;
            s->fields[st->child] = c;
            c->shape = C_LIST;
            c->kind = K_MESSAGE;
            if ((st->node = build_frame(extra, depth + 1)) == NULL) goto fail;
            c->items = st->node->col;
            break;
        case F_SWITCH: {  /* extra: (the cases' nullable flags, ((key, field, spec or None)...)) */
            PyObject *case_nullables, *cases;
            if (!PyArg_ParseTuple(extra, "O!O!:switch", &PyTuple_Type, &case_nullables,
                                  &PyTuple_Type, &cases))
                goto fail;
            if (st->at != 1 || !sized[i]) {
                PyErr_SetString(PyExc_ValueError, "a switch is sized by a size step");
                goto fail;
            }
            if ((c = col_new()) == NULL) goto fail;
            s->fields[st->child] = c;
            c->shape = C_STRUCT;
            c->kind = K_MESSAGE;
            c->nfields = PyTuple_GET_SIZE(case_nullables);
            c->fields = PyMem_Calloc((size_t)(c->nfields ? c->nfields : 1), sizeof(Col *));
            Py_ssize_t ncases = PyTuple_GET_SIZE(cases);
            st->keys = PyMem_Calloc((size_t)(ncases ? ncases : 1), sizeof(int64_t));
            st->cases = PyMem_Calloc((size_t)(ncases ? ncases : 1), sizeof(FNode *));
            if (c->fields == NULL || st->keys == NULL || st->cases == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            for (Py_ssize_t k = 0; k < ncases; k++) {
                long long key;
                Py_ssize_t field;
                PyObject *spec;
                st->ncases = k + 1;
                if (!PyArg_ParseTuple(PyTuple_GET_ITEM(cases, k), "LnO:case", &key, &field,
                                      &spec))
                    goto fail;
                if (field < 0 || field >= c->nfields || c->fields[field] != NULL
                    || (k > 0 && key <= st->keys[k - 1])) {
                    PyErr_SetString(PyExc_ValueError, "switch cases out of range or order");
                    goto fail;
                }
                st->keys[k] = key;
                if (spec != Py_None) {
                    if ((st->cases[k] = build_frame(spec, depth + 1)) == NULL) goto fail;
                    c->fields[field] = st->cases[k]->col;
                }
            }
            for (Py_ssize_t k = 0; k < c->nfields; k++) {
                if (c->fields[k] == NULL) {  /* a case left to the row path, or none's */
                    if ((c->fields[k] = col_new()) == NULL) goto fail;
                    c->fields[k]->shape = C_STRUCT;
                    c->fields[k]->kind = K_MESSAGE;
                    c->fields[k]->never = 1;
                }
                c->fields[k]->nullable = PyObject_IsTrue(PyTuple_GET_ITEM(case_nullables, k));
            }
            break;
        }
        default:
            PyErr_Format(PyExc_ValueError, "frame step %d has no columnar form", st->op);
            goto fail;
        }
        if ((st->op == F_PROTO || st->op == F_ARRAY || (st->op == F_BYTES && st->at >= 0))
            && !sized[i]) {
            PyErr_SetString(PyExc_ValueError, "a sized step without its size step");
            goto fail;
        }
        if (sized[i] && st->op != F_PROTO && st->op != F_BYTES && st->op != F_SWITCH
            && st->op != F_ARRAY) {
            PyErr_SetString(PyExc_ValueError, "a size step sizes a step that takes none");
            goto fail;
        }
    }
    for (Py_ssize_t k = 0; k < s->nfields; k++) {
        if (s->fields[k] == NULL) {
            PyErr_SetString(PyExc_ValueError, "a frame field that no step fills");
            goto fail;
        }
        s->fields[k]->nullable = PyObject_IsTrue(PyTuple_GET_ITEM(nullables, k));
    }
    return n;
fail:
    col_free(s);  /* with the columns of nested nodes, which fnode_free leaves */
    n->col = NULL;
    fnode_free(n);
    return NULL;
}

/* The stored integer of `st` at *pp (BAD when fewer than its bytes remain). */
static int read_uint(const FStep *st, const uint8_t **pp, const uint8_t *end, uint64_t *out) {
    if (end - *pp < st->width) return BAD;
    uint64_t v = 0;
    for (int k = 0; k < st->width; k++) {
        uint64_t b = (*pp)[k];
        v |= st->big ? b << (8 * (st->width - 1 - k)) : b << (8 * k);
    }
    *pp += st->width;
    *out = v;
    return OK;
}

static int negative(const FStep *st, uint64_t v) {
    return st->is_signed && st->width > 0 && (v >> (8 * st->width - 1)) & 1;
}

/* The stored integer read as `st` says, a signed one extended to 64 bits. */
static int read_int(const FStep *st, const uint8_t **pp, const uint8_t *end, uint64_t *out) {
    if (read_uint(st, pp, end, out) != OK) return BAD;
    if (negative(st, *out) && st->width < 8) *out |= ~(uint64_t)0 << (8 * st->width);
    return OK;
}

/* Commit a text or bytes entry of column c: BAD when text is not what the row path's decoder
   gives back byte for byte. Strict UTF-8 is its own modified UTF-8 (mutf8.decode gives the
   same text); C0 80 and surrogate pairs are left to the row path. */
static int commit_text(Col *c, int text, const uint8_t *p, Py_ssize_t n) {
    if (text != T_BYTES && !valid_utf8(p, n)) return BAD;
    c->seen = 1;
    c->str = p;
    c->str_len = n;
    return col_commit_value(c) < 0 ? ERR : OK;
}

/* Whether the row of step st is there: its condition on the message an earlier step of
   node n decoded, if it has one. */
static int when_holds(const FNode *n, const FStep *st) {
    if (st->when_op == W_ALWAYS) return 1;
    const Col *m = n->col->fields[n->steps[st->when_step].child];
    int eq = m->fields[st->when_field]->bits == st->when_bits;
    return st->when_op == W_EQ ? eq : !eq;
}

/* The case of switch step st for `key`, or -1. */
static Py_ssize_t find_case(const FStep *st, int64_t key) {
    Py_ssize_t lo = 0, hi = st->ncases;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (st->keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < st->ncases && st->keys[lo] == key ? lo : -1;
}

/* Whether `checksum` over [p, end) is `sent`: 1, 0, or -1 with a Python exception set. */
static int checksum_matches(PyObject *checksum, const uint8_t *p, const uint8_t *end,
                            uint64_t sent) {
    PyObject *view = PyMemoryView_FromMemory((char *)p, end - p, PyBUF_READ);
    if (view == NULL) return -1;
    PyObject *sum = PyObject_CallOneArg(checksum, view);
    Py_DECREF(view);
    if (sum == NULL) return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(sum);
    Py_DECREF(sum);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();  /* no stored integer is negative or past 64 bits */
        return 0;
    }
    return v == sent;
}

/* Decode one frame struct at *pp (its region ends at `end`) into the next entry of n->col. */
static int decode_frame_struct(const FNode *n, const uint8_t **pp, const uint8_t *end) {
    const uint8_t *p = *pp;
    uint64_t sizes[F_MAX_STEPS];
    uint64_t lens[F_MAX_STEPS];  /* the length of each bytes row read so far */
    uint64_t key = 0;
    int have_key = 0;
    Col *s = n->col;
    Py_ssize_t at = s->len;  /* the entry being decoded; the fields catch up to it */
    for (Py_ssize_t i = 0; i < n->nsteps; i++) {
        const FStep *st = &n->steps[i];
        uint64_t v;
        int r = OK;
        switch (st->op) {
        case F_SIZE_REST:
            if (read_uint(st, &p, end, &v) != OK || negative(st, v)
                || v > (uint64_t)(end - p))
                return BAD;
            end = p + v;
            break;
        case F_SIZE:
            if (read_uint(st, &p, end, &v) != OK || negative(st, v)) return BAD;
            sizes[st->at] = v;
            break;
        case F_COUNT:  /* a negative count is no items to the row path too */
            if (read_uint(st, &p, end, &v) != OK) return BAD;
            sizes[st->at] = negative(st, v) ? 0 : v;
            break;
        case F_LEN_VALUE:  /* its value is only written; reading steps over it */
            if (end - p < st->width) return BAD;
            p += st->width;
            break;
        case F_ARRAY: {
            Col *c = s->fields[st->child];
            if (col_catch_up(c, at) < 0) return ERR;
            for (uint64_t k = 0; k < sizes[i]; k++) {
                const uint8_t *before = p;
                r = decode_frame_struct(st->node, &p, end);
                if (r != OK) return r;
                if (p == before) return BAD;  /* items of no bytes: the row path counts */
            }
            touch(c);
            if (buf_i32(&c->offsets, (int32_t)c->items->len) < 0) return ERR;
            if (put_valid(c, 1) < 0) return ERR;
            c->len++;
            break;
        }
        case F_INT_WHEN: {
            Col *c = s->fields[st->child];
            int64_t len = (int64_t)lens[st->when_step], than = (int64_t)st->when_bits;
            int there;
            switch (st->when_op) {
            case W_EQ: there = len == than; break;
            case W_NE: there = len != than; break;
            case W_GT: there = len > than; break;
            case W_GE: there = len >= than; break;
            case W_LT: there = len < than; break;
            default: there = len <= than; break;
            }
            if (col_catch_up(c, at) < 0) return ERR;
            if (!there) {
                if (col_null(c) < 0) return ERR;
                break;
            }
            if (read_int(st, &p, end, &v) != OK) return BAD;
            c->seen = 1;
            c->bits = v;
            if (col_commit_value(c) < 0) return ERR;
            break;
        }
        case F_DEFAULT_BOOL: {
            Col *c = s->fields[st->child];
            if (col_catch_up(c, at) < 0) return ERR;
            c->seen = 1;
            c->bits = p < end ? *p++ != 0 : st->number;
            if (col_commit_value(c) < 0) return ERR;
            break;
        }
        case F_CONST:
            if (read_uint(st, &p, end, &v) != OK || v != st->number) return BAD;
            break;
        case F_CHECKSUM: {
            if (read_uint(st, &p, end, &v) != OK) return BAD;
            int m = checksum_matches(st->checksum, p, end, v);
            if (m < 0) return ERR;
            if (!m) return BAD;  /* the row path gives the frame with its ChecksumFailure */
            break;
        }
        case F_PROTO: {
            Col *c = s->fields[st->child];
            if (sizes[i] > (uint64_t)(end - p)) return BAD;
            if (col_catch_up(c, at) < 0) return ERR;
            r = decode_message(c, p, p + sizes[i], 0);
            if (r != OK) return r;
            p += sizes[i];
            if (st->type_field >= 0) {  /* a command: it carries the body its type names */
                const Col *type = c->fields[st->type_field];
                if (!type->seen || type->bits >= (uint64_t)st->nbody) return BAD;
                int32_t body = st->body_of[type->bits];
                if (body < 0 || !c->fields[body]->seen) return BAD;
            }
            break;
        }
        case F_BYTES: {
            Col *c = s->fields[st->child];
            uint64_t size = st->at < 0 ? (uint64_t)(end - p) : sizes[i];
            if (size > (uint64_t)(end - p)) return BAD;
            if (col_catch_up(c, at) < 0) return ERR;
            c->seen = 1;
            c->str = p;
            c->str_len = (Py_ssize_t)size;
            if (col_commit_value(c) < 0) return ERR;
            p += size;
            lens[i] = size;
            break;
        }
        case F_STRUCT: {
            int present = 1;
            if (st->at == P_REMAINING) {
                present = p < end;
            } else if (st->at == P_PEEK) {
                const uint8_t *q = p;
                present = read_uint(st, &q, end, &v) == OK && v == st->number;
            }
            if (present) {  /* else it lags, as an absent message does */
                if (col_catch_up(st->node->col, at) < 0) return ERR;
                r = decode_frame_struct(st->node, &p, end);
            }
            if (r != OK) return r;
            break;
        }
        case F_INT: case F_DEFAULT: {
            Col *c = s->fields[st->child];
            if (st->op == F_DEFAULT && end - p < st->width) v = st->number;
            else if (read_int(st, &p, end, &v) != OK) return BAD;
            if (col_catch_up(c, at) < 0) return ERR;
            c->seen = 1;
            c->bits = v;
            if (col_commit_value(c) < 0) return ERR;
            break;
        }
        case F_BOOL: {
            Col *c = s->fields[st->child];
            if (p >= end) return BAD;
            if (col_catch_up(c, at) < 0) return ERR;
            c->seen = 1;
            c->bits = *p++ != 0;
            if (col_commit_value(c) < 0) return ERR;
            break;
        }
        case F_UUID: {  /* as str(uuid.UUID): lowercase hex, dashes after 4, 6, 8, 10 bytes */
            static const char hex[] = "0123456789abcdef";
            char text[36];
            Col *c = s->fields[st->child];
            if (end - p < 16) return BAD;
            for (int k = 0, o = 0; k < 16; k++) {
                if (k == 4 || k == 6 || k == 8 || k == 10) text[o++] = '-';
                text[o++] = hex[p[k] >> 4];
                text[o++] = hex[p[k] & 15];
            }
            p += 16;
            if (col_catch_up(c, at) < 0) return ERR;
            r = commit_text(c, T_BYTES, (const uint8_t *)text, 36);
            if (r != OK) return r;
            break;
        }
        case F_PREFIXED: {
            Col *c = s->fields[st->child];
            if (col_catch_up(c, at) < 0) return ERR;
            if (st->at != X_ALWAYS && p >= end) {  /* not there: the default, or None */
                if (st->at == X_OPTIONAL) {
                    if (col_null(c) < 0) return ERR;
                    lens[i] = 0;  /* None: no condition reads it (the plan checks) */
                } else {
                    c->seen = 1;
                    c->str = (const uint8_t *)PyBytes_AS_STRING(st->checksum);
                    c->str_len = PyBytes_GET_SIZE(st->checksum);
                    if (col_commit_value(c) < 0) return ERR;
                    lens[i] = (uint64_t)c->str_len;
                }
                break;
            }
            if (read_uint(st, &p, end, &v) != OK || negative(st, v)
                || v > (uint64_t)(end - p))
                return BAD;
            r = commit_text(c, (int)st->number, p, (Py_ssize_t)v);
            if (r != OK) return r;
            p += v;
            lens[i] = v;
            break;
        }
        case F_SKIP:
            p = end;
            break;
        case F_RUN: {  /* nested structs up to the end of the region */
            Col *c = s->fields[st->child];
            if (col_catch_up(c, at) < 0) return ERR;
            while (p < end) {
                const uint8_t *before = p;
                r = decode_frame_struct(st->node, &p, end);
                if (r != OK) return r;
                if (p == before) return BAD;  /* the row path would never end */
            }
            touch(c);
            if (buf_i32(&c->offsets, (int32_t)c->items->len) < 0) return ERR;
            if (put_valid(c, 1) < 0) return ERR;
            c->len++;
            break;
        }
        case F_PROTO_PREFIXED: {  /* a message after its length, there when its condition is */
            Col *c = s->fields[st->child];
            if (!when_holds(n, st)) break;  /* None: it lags */
            if (st->width == 0 ? read_varint(&p, end, &v) != OK
                               : read_uint(st, &p, end, &v) != OK || negative(st, v))
                return BAD;
            if (v > (uint64_t)(end - p)) return BAD;
            if (col_catch_up(c, at) < 0) return ERR;
            r = decode_message(c, p, p + v, 0);
            if (r != OK) return r;
            p += v;
            break;
        }
        case F_STRUCT_WHEN:
            if (!when_holds(n, st)) break;
            if (col_catch_up(st->node->col, at) < 0) return ERR;
            r = decode_frame_struct(st->node, &p, end);
            if (r != OK) return r;
            break;
        case F_BLOCKS: {  /* a struct whose bytes come in sized blocks, read as one */
            uint64_t count, size, total = 0;
            if (read_uint(st, &p, end, &count) != OK || negative(st, count)
                || (st->blocks_max && count > st->blocks_max))
                return BAD;
            const uint8_t *q = p;
            for (uint64_t k = 0; k < count; k++) {
                if (read_uint(st->block, &q, end, &size) != OK || negative(st->block, size)
                    || size > st->block_max || size > (uint64_t)(end - q))
                    return BAD;
                q += size;
                total += size;
            }
            const uint8_t *content = q, *cend = q;  /* no blocks: no bytes */
            uint8_t *joined = NULL;
            if (count == 1) {  /* the common case: read in place */
                content = p + st->block->width;
                cend = content + total;
            } else if (count > 1) {
                if ((joined = PyMem_Malloc((size_t)total + 1)) == NULL) {
                    PyErr_NoMemory();
                    return ERR;
                }
                const uint8_t *b = p;
                uint8_t *o = joined;
                for (uint64_t k = 0; k < count; k++) {
                    read_uint(st->block, &b, end, &size);  /* checked above */
                    memcpy(o, b, (size_t)size);
                    o += size;
                    b += size;
                }
                content = joined;
                cend = joined + total;
            }
            /* what the struct keeps of the bytes is copied into its columns as it goes */
            const uint8_t *cp = content;
            if (col_catch_up(st->node->col, at) < 0) r = ERR;
            else r = decode_frame_struct(st->node, &cp, cend);
            PyMem_Free(joined);
            if (r != OK) return r;
            if (cp != cend) return BAD;  /* block bytes left over */
            p = q;
            break;
        }
        case F_SWITCH_KEY:
            if (read_int(st, &p, end, &key) != OK) return BAD;
            have_key = 1;
            break;
        case F_SWITCH: {  /* the case the key names, filling its size exactly */
            Col *u = s->fields[st->child];
            if (!have_key || sizes[i] > (uint64_t)(end - p)) return BAD;
            Py_ssize_t k = find_case(st, (int64_t)key);
            if (k < 0 || st->cases[k] == NULL) return BAD;  /* unknown, or the row path's */
            const uint8_t *q = p, *vend = p + sizes[i];
            if (col_catch_up(u, at) < 0 || col_catch_up(st->cases[k]->col, u->len) < 0)
                return ERR;
            r = decode_frame_struct(st->cases[k], &q, vend);
            if (r != OK) return r;
            if (q != vend) return BAD;
            touch(u);
            if (put_valid(u, 1) < 0) return ERR;
            u->len++;
            p = vend;
            break;
        }
        default:
            return BAD;
        }
    }
    if (n->check_end && p != end) return BAD;
    touch(s);
    if (put_valid(s, 1) < 0) return ERR;
    s->len++;
    *pp = p;
    return OK;
}

typedef struct {
    PyObject_HEAD
    FNode *root;
    int busy;
} FramePlanObject;

static int frame_row(void *root, const uint8_t *p, const uint8_t *end) {
    int r = decode_frame_struct((const FNode *)root, &p, end);
    return r == OK && p != end ? BAD : r;  /* bytes after the frame: the row path's error */
}

static int frame_plan_init(FramePlanObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *spec;
    if (!PyArg_ParseTuple(args, "O!:FramePlan", &PyTuple_Type, &spec)) return -1;
    FNode *root = build_frame(spec, 0);
    if (root == NULL) return -1;
    if (col_attach_undo(root->col) < 0) {
        col_free(root->col);
        fnode_free(root);
        return -1;
    }
    root->col->nullable = 1;
    if (self->root != NULL) col_free(self->root->col);
    fnode_free(self->root);
    self->root = root;
    return 0;
}

static void frame_plan_dealloc(FramePlanObject *self) {
    if (self->root != NULL) col_free(self->root->col);
    fnode_free(self->root);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *frame_plan_decode(FramePlanObject *self, PyObject *args) {
    return decode_run(args, self->root == NULL ? NULL : self->root->col, &self->busy,
                      frame_row, self->root);
}

static PyMethodDef frame_plan_methods[] = {
    {"decode", (PyCFunction)frame_plan_decode, METH_VARARGS,
     "decode(offsets, data, validity, offset, length) -> (column buffers, bad row indices)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FramePlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protoframe.runtime.codec._columnar.FramePlan",
    .tp_basicsize = sizeof(FramePlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A columnar decoder of one frame struct: FramePlan((check_end, nullables, steps)).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)frame_plan_init,
    .tp_dealloc = (destructor)frame_plan_dealloc,
    .tp_methods = frame_plan_methods,
};

/* The step numbers, for runtime/spark/columnar_frames.py. */
static int add_frame_steps(PyObject *m) {
    PyObject *d = Py_BuildValue("{sisisisisisisisisisisisisisisisisisisisisisisisi}",
                                "size_rest", F_SIZE_REST,
                                "size", F_SIZE, "const", F_CONST, "checksum", F_CHECKSUM,
                                "proto", F_PROTO, "bytes", F_BYTES, "struct", F_STRUCT,
                                "int", F_INT, "bool", F_BOOL, "uuid", F_UUID,
                                "prefixed", F_PREFIXED, "default", F_DEFAULT,
                                "skip_trailing", F_SKIP, "struct_run", F_RUN,
                                "switch_key", F_SWITCH_KEY, "switch", F_SWITCH,
                                "proto_prefixed", F_PROTO_PREFIXED,
                                "struct_when", F_STRUCT_WHEN, "blocks", F_BLOCKS,
                                "count_of", F_COUNT, "struct_array", F_ARRAY,
                                "len_value", F_LEN_VALUE, "int_when", F_INT_WHEN,
                                "default_bool", F_DEFAULT_BOOL);
    if (d == NULL) return -1;
    PyObject *p = Py_BuildValue("{sisisisisisisisisisisisisisisi}", "always", P_ALWAYS,
                                "remaining", P_REMAINING, "peek", P_PEEK,
                                "text_bytes", T_BYTES, "text_utf8", T_UTF8,
                                "text_mutf8", T_MUTF8, "prefixed_always", X_ALWAYS,
                                "prefixed_default", X_DEFAULT, "prefixed_optional", X_OPTIONAL,
                                "when_eq", W_EQ, "when_ne", W_NE, "when_gt", W_GT,
                                "when_ge", W_GE, "when_lt", W_LT, "when_le", W_LE);
    if (p == NULL) {
        Py_DECREF(d);
        return -1;
    }
    int r = PyModule_AddObjectRef(m, "FRAME_STEPS", d) < 0
            || PyModule_AddObjectRef(m, "FRAME_PRESENCE", p) < 0;
    Py_DECREF(d);
    Py_DECREF(p);
    return r ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* the module */

static struct PyModuleDef columnar_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "protoframe.runtime.codec._columnar",
    .m_doc = "Columnar protobuf decoding into Arrow buffers (see runtime/spark/columnar.py).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__columnar(void) {
    if (PyType_Ready(&PlanType) < 0 || PyType_Ready(&FramePlanType) < 0) return NULL;
    PyObject *m = PyModule_Create(&columnar_module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Plan", (PyObject *)&PlanType) < 0
        || PyModule_AddObjectRef(m, "FramePlan", (PyObject *)&FramePlanType) < 0
        || add_vocabulary(m) < 0 || add_frame_steps(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
