/* Generated from runtime/codec/vocabulary.py by `python runtime/codec/vocabulary.py`
   (make runs it). DO NOT EDIT: change vocabulary.py and run make. */
#ifndef PROTOFRAME_VOCABULARY_H
#define PROTOFRAME_VOCABULARY_H

#define FRAME_MAX_ROWS 64

enum { /* FIELD_KINDS */
    K_INT32 = 1,
    K_INT64 = 2,
    K_UINT32 = 3,
    K_UINT64 = 4,
    K_SINT32 = 5,
    K_SINT64 = 6,
    K_BOOL = 7,
    K_ENUM = 8,
    K_FIXED32 = 9,
    K_SFIXED32 = 10,
    K_FIXED64 = 11,
    K_SFIXED64 = 12,
    K_FLOAT = 13,
    K_DOUBLE = 14,
    K_STRING = 15,
    K_BYTES = 16,
    K_MESSAGE = 17,
    K_OPEN_ENUM = 18,
    K_KIND_END = 19,
};

enum { /* FIELD_MODES */
    M_REQUIRED = 0,
    M_OPTIONAL = 1,
    M_REPEATED = 2,
    M_PACKED = 3,
    M_SPARSE = 4,
    M_IMPLICIT = 5,
    M_ONEOF = 6,
    M_MAP = 7,
    M_MODE_END = 8,
};

enum { /* FRAME_OPS */
    OP_INT = 1,
    OP_CONST = 2,
    OP_SIZE = 3,
    OP_SIZE_REST = 4,
    OP_CHECKSUM = 5,
    OP_PROTO = 6,
    OP_BYTES = 7,
    OP_STRUCT = 8,
    OP_UUID = 9,
    OP_SWITCH = 10,
    OP_SWITCH_KEY = 11,
    OP_STRUCT_RUN = 12,
    OP_PREFIXED = 13,
    OP_DEFAULT = 14,
    OP_SKIP_TRAILING = 15,
    OP_VARINT = 16,
    OP_BOOL = 17,
    OP_COUNT_OF = 18,
    OP_STRUCT_ARRAY = 19,
    OP_END = 20,
};

enum { /* FRAME_PRESENCE */
    PRESENT_ALWAYS = 0,
    PRESENT_REMAINING = 1,
    PRESENT_PEEK = 2,
};

/* (vocabulary, name, number) for each word; ended by a NULL vocabulary. */
typedef struct { const char *vocabulary, *name; int number; } VocabularyWord;
static const VocabularyWord VOCABULARY_WORDS[] = {
    {"FIELD_KINDS", "int32", K_INT32},
    {"FIELD_KINDS", "int64", K_INT64},
    {"FIELD_KINDS", "uint32", K_UINT32},
    {"FIELD_KINDS", "uint64", K_UINT64},
    {"FIELD_KINDS", "sint32", K_SINT32},
    {"FIELD_KINDS", "sint64", K_SINT64},
    {"FIELD_KINDS", "bool", K_BOOL},
    {"FIELD_KINDS", "enum", K_ENUM},
    {"FIELD_KINDS", "fixed32", K_FIXED32},
    {"FIELD_KINDS", "sfixed32", K_SFIXED32},
    {"FIELD_KINDS", "fixed64", K_FIXED64},
    {"FIELD_KINDS", "sfixed64", K_SFIXED64},
    {"FIELD_KINDS", "float", K_FLOAT},
    {"FIELD_KINDS", "double", K_DOUBLE},
    {"FIELD_KINDS", "string", K_STRING},
    {"FIELD_KINDS", "bytes", K_BYTES},
    {"FIELD_KINDS", "message", K_MESSAGE},
    {"FIELD_KINDS", "open_enum", K_OPEN_ENUM},
    {"FIELD_MODES", "required", M_REQUIRED},
    {"FIELD_MODES", "optional", M_OPTIONAL},
    {"FIELD_MODES", "repeated", M_REPEATED},
    {"FIELD_MODES", "packed", M_PACKED},
    {"FIELD_MODES", "sparse", M_SPARSE},
    {"FIELD_MODES", "implicit", M_IMPLICIT},
    {"FIELD_MODES", "oneof", M_ONEOF},
    {"FIELD_MODES", "map", M_MAP},
    {"FRAME_OPS", "int", OP_INT},
    {"FRAME_OPS", "const", OP_CONST},
    {"FRAME_OPS", "size", OP_SIZE},
    {"FRAME_OPS", "size_rest", OP_SIZE_REST},
    {"FRAME_OPS", "checksum", OP_CHECKSUM},
    {"FRAME_OPS", "proto", OP_PROTO},
    {"FRAME_OPS", "bytes", OP_BYTES},
    {"FRAME_OPS", "struct", OP_STRUCT},
    {"FRAME_OPS", "uuid", OP_UUID},
    {"FRAME_OPS", "switch", OP_SWITCH},
    {"FRAME_OPS", "switch_key", OP_SWITCH_KEY},
    {"FRAME_OPS", "struct_run", OP_STRUCT_RUN},
    {"FRAME_OPS", "prefixed", OP_PREFIXED},
    {"FRAME_OPS", "default", OP_DEFAULT},
    {"FRAME_OPS", "skip_trailing", OP_SKIP_TRAILING},
    {"FRAME_OPS", "varint", OP_VARINT},
    {"FRAME_OPS", "bool", OP_BOOL},
    {"FRAME_OPS", "count_of", OP_COUNT_OF},
    {"FRAME_OPS", "struct_array", OP_STRUCT_ARRAY},
    {"FRAME_PRESENCE", "always", PRESENT_ALWAYS},
    {"FRAME_PRESENCE", "remaining", PRESENT_REMAINING},
    {"FRAME_PRESENCE", "peek", PRESENT_PEEK},
    {NULL, NULL, 0},
};

#endif
