"""The layout plan: each struct lowered to the ordered operations both codecs read.

A plan is the struct's fields in wire order, each one typed operation saying what is read
and written there (``ReadInt``, ``SizeOf``, ``Nested``...), between an optional ``Params``
at the head and ``SkipTrailing`` at the tail. The Python emitters walk the plans: the class
of each operation decides the code written for it, its attributes carry the facts that code
needs, and the plan answers what both codecs must agree on (which checksums are verified as
soon as they are read, whether bytes after the last field are an error); ``frame_layouts``
writes the C tables from them.

The operations are in ``layout_ops``; each has a ``word``, in the C vocabulary
(``runtime/codec/vocabulary.py``) or not. So "the C codec can take this struct" is
:attr:`LayoutPlan.compiled`: every word of its plan is in the vocabulary and every nested plan
is compiled — there is no second list of rules. Lowering runs after validation and naming, so
it never meets a spec error.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

from protoframe.generator.compiled_exprs import Step, guard_program, program
from protoframe.generator.expr import Expr
from protoframe.generator.frame_ir import (
    INT_TYPES,
    ArrayField,
    BlocksField,
    BoolField,
    BytesField,
    FloatField,
    FrameField,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    SwitchField,
    UuidField,
    VarintField,
    struct_refs,
)
from protoframe.generator.ir import Label
from protoframe.generator.layout_ops import (
    Always,
    AnyFieldOp,
    Array,
    Bits,
    Blocks,
    BytesOther,
    BytesSized,
    BytesToEnd,
    Checksum,
    Computed,
    Condition,
    Const,
    ConstBytes,
    Default,
    Delimited,
    Envelope,
    FixedLength,
    IfPeek,
    IfRemaining,
    IntType,
    KindOp,
    Marker,
    MaskedBytes,
    Nested,
    NestedOther,
    Op,
    OptionalScalar,
    Params,
    PlanOp,
    Prefix,
    Presence,
    ProtoBody,
    ProtoOther,
    RangedInt,
    ReadBool,
    ReadFloat,
    ReadInt,
    ReadLenenc,
    ReadPacked,
    ReadUuid,
    ReadVarint,
    Region,
    Requires,
    SizeOf,
    SizeRest,
    SkipTrailing,
    String,
    SubField,
    Switch,
    Terminated,
    WithArgs,
    Wrap,
    c_words,
    guardable,
    kind_op,
    len_value,
    unconditional,
)
from protoframe.generator.length_rules import size_extra
from protoframe.generator.spec_ir import FrameSpec
from protoframe.generator.value_rules import int_bounds, varint_bytes
from protoframe.runtime.codec import vocabulary
from protoframe.runtime.codec.varlen import lenenc_bytes


@dataclass(frozen=True)
class LayoutPlan:
    """A struct lowered: its operations in order, and what both codecs need to agree on."""

    struct: StructDef = field(compare=False, repr=False)
    ops: tuple[PlanOp, ...]
    # A field reads to the end of the struct's region (then a checksum running from the next
    # field to the end covers bytes the decoder can see before parsing them).
    fills_region: bool
    # The region's end is where decoding stops: a field outside any size range reads up to
    # it, or a size of the rest sets it. Otherwise the decoder stops after the last field
    # and the holder goes on from there.
    reads_to_end: bool

    @property
    def skips_trailing(self) -> bool:
        """Decoding skips bytes left after the last field (``trailing: ignore``)."""
        return bool(self.ops) and isinstance(self.ops[-1], SkipTrailing)

    @property
    def delimiter(self) -> bytes | None:
        """The bytes the struct ends with (``delimiter:``), if any."""
        return next((op.delimiter for op in self.ops if isinstance(op, Delimited)), None)

    @property
    def check_end(self) -> bool:
        """Decoding rejects bytes left after the last field."""
        return self.reads_to_end and not self.skips_trailing

    @property
    def name(self) -> str:
        return self.struct.name

    @property
    def field_ops(self) -> tuple[AnyFieldOp, ...]:
        """The fields' operations, in wire order (one per field)."""
        return tuple(op for op in self.ops
                     if not isinstance(op, Params | SkipTrailing | Delimited | Requires))

    def op(self, name: str) -> AnyFieldOp:
        return next(op for op in self.field_ops if op.name == name)

    @property
    def early_checksums(self) -> frozenset[str]:
        """Checksums verified as soon as they are read."""
        return frozenset(op.name for op in self.ops if isinstance(op, Checksum) and op.early)

    @property
    def unread_on_decode(self) -> frozenset[str]:
        """The ``value:`` fields the decoder steps over: nothing read on decode names them.

        Such a field is neither stored nor checked on decode, so reading it would only bind a
        local that nothing reads.
        """
        named = decode_names(self.struct)
        return frozenset(
            f.name for f in self.struct.fields
            if f.value is not None and f.name not in named and f.const is None
            and f.size_of is None and f.size_range is None and f.count_of is None
            and f.checksum is None and not f.is_switch_key
            and not (isinstance(f, IntField) and f.reserved_mask))

    @property
    def unneeded_on_encode(self) -> frozenset[str]:
        """The byte-less ``value:`` fields the encoder need not work out: they put nothing on
        the wire, and no expression evaluated on encode names them."""
        named = set().union(*(_expr_names(_exprs(f)) for f in self.struct.fields))
        return frozenset(f.name for f in self.struct.fields
                         if not f.wire and f.value is not None and f.name not in named)

    @property
    def unknown_to_c(self) -> tuple[Op, ...]:
        """The operations whose words the compiled codec does not know."""
        words = c_words()
        return tuple(op for op in self.ops if op.word not in words
                     or any(t.width not in vocabulary.FRAME_INT_WIDTHS for t in _int_types(op)))

    @property
    def compiled(self) -> bool:
        """Whether the compiled codec takes this struct: it knows every operation, the nested
        plans are compiled, and the struct fits its row arrays (one row per field).

        Kept for the vocabulary it was worked out with: the words of a holder ask for their
        nested plans' answer again and again."""
        key = (c_words(), vocabulary.FRAME_MAX_ROWS)
        cache: dict[tuple[frozenset[str], int], bool] = self.__dict__.setdefault(
            "_compiled_for", {})
        if key not in cache:
            cache[key] = self._compiled()
        return cache[key]

    def _compiled(self) -> bool:
        ops = self.field_ops
        rows = len(ops) + self.skips_trailing
        rows += sum(1 for op in ops if op.word == "guard")  # a guard row before its field's
        rows += sum(len(op.exprs) for op in self.ops if isinstance(op, Requires))  # one a rule
        rows += self.delimiter is not None  # a row of its own, first
        rows += sum(1 for op in ops if op.word == "size_range")  # its end row
        # A struct with no fields has a table of no rows: decoding it makes the instance.
        return (rows <= vocabulary.FRAME_MAX_ROWS and not self.unknown_to_c
                and all(op.plan.compiled for op in ops if isinstance(op, Nested))
                and c_links_hold(ops) and programs_hold(self) and rules_hold(self))


# The words of a derived field's row of the compiled codec: stored, not (a size), a key.
_DERIVE_WORDS = frozenset({"derive", "derived_size", "derived_key"})
# The words of the rows a size row of the compiled codec can measure.
_SIZED_WORDS = frozenset({"proto", vocabulary.ENVELOPE, "bytes", "signed_bytes", "switch",
                          "directional_switch", "struct_run_sized", "masked_bytes"})
# The words of the rows that are "switch" rows of the compiled codec.
_SWITCH_WORDS = frozenset({"switch", "directional_switch"})
# The sized rows the compiled codec writes right after their size row, then measures.
_RIGHT_AFTER_SIZE = _SWITCH_WORDS | {"struct_run_sized"}
# The rows whose values a compiled condition may read: integers always there.
_INT_WORDS = frozenset({"int", "varint", "bool"})


def _optional_struct(op: AnyFieldOp) -> bool:
    """Whether ``op`` is a compiled nested struct row that may be None (peeked, or there when
    bytes remain)."""
    return isinstance(op, Nested) and op.word == "struct" and not isinstance(op.when, Always)


def c_links_hold(ops: tuple[AnyFieldOp, ...]) -> bool:
    """Whether the rows the compiled codec links are where its tables need them: a size before
    the field it measures (a switch right after its size), and a switch's key before it."""
    at = {op.name: i for i, op in enumerate(ops)}
    for i, op in enumerate(ops):
        kind = kind_op(op)
        if isinstance(kind, SizeOf) and op is kind:
            target = at.get(kind.target, -1)
            if target <= i or ops[target].word not in _SIZED_WORDS:
                return False
            if ops[target].word in _RIGHT_AFTER_SIZE and target != i + 1:
                return False
        sized_by = op.region.size if op.word in {*_RIGHT_AFTER_SIZE, "signed_bytes"} and (
            isinstance(op, Switch | BytesOther | Array)) else None
        if sized_by is not None:
            size = at.get(sized_by, -1)
            measure = ops[size] if 0 <= size < i else None
            if not isinstance(measure, SizeOf) or measure.target != op.name:
                return False
            if op.word in _RIGHT_AFTER_SIZE and size != i - 1:
                return False
        if isinstance(op, Switch) and op.word in _SWITCH_WORDS:
            key = at.get(op.key, -1)
            if not 0 <= key < i or ops[key].word not in ("switch_key", "derived_key"):
                return False
        if op.word == "derived_key" and not any(
                isinstance(o, Switch) and o.key == op.name and o.word in _SWITCH_WORDS
                for o in ops[i + 1:]):
            return False
        if isinstance(op, SubField) and op.word == "bit_field" and not _after_its_bits(ops, i):
            return False
        if isinstance(op, Condition) and op.word in ("condition", "struct_run_when"):
            steps = program(op.expr) or ()
            names = [str(arg) for word, arg in steps if word == "field"]
            if not all(0 <= at.get(name, -1) < i and ops[at[name]].word in _INT_WORDS
                       for name in names):
                return False
            # has() tests an earlier nested struct that may be left out (None).
            tested = [str(arg) for word, arg in steps if word == "has"]
            if not all(0 <= at.get(name, -1) < i and _optional_struct(ops[at[name]])
                       for name in tested):
                return False
        if isinstance(op, Condition) and op.word in ("struct_when", "proto_prefixed_when",
                                                     "int_when"):
            if not _guard_reads_earlier_rows(op, ops[:i], at):
                return False
        if isinstance(op, Computed) and op.word == "size_range" and not _range_holds(ops, i):
            return False
        if isinstance(op, Computed) and op.word == "len_value":
            named = (len_value(op) or (0, ""))[1]
            if named not in at or not _bytes_row(ops[at[named]]):
                return False
        if isinstance(op, Computed) and op.word == "count_of":
            array = at.get(op.field.count_of or "", -1)
            counted = kind_op(ops[array]) if array > i else None
            if (not isinstance(counted, Array)
                    or ops[array].word not in ("struct_array", "array_args", "int_array")
                    or counted.count is None or counted.count.text.strip() != op.name):
                return False
        counted = kind_op(op)
        if isinstance(counted, Array) and counted.count_program is not None and (
                op.word in ("struct_array", "int_array")
                or op.word == "guard" and type(counted.element) is ReadInt):
            if not _count_reads_earlier(counted.count_program, ops, at, i):
                return False
        elif isinstance(op, Array) and op.word in ("struct_array", "int_array") \
                and op.count is not None:
            count = at.get(op.count.text.strip(), -1)
            if not 0 <= count < i or ops[count].word != "count_of":
                return False
        if isinstance(op, BytesOther) and op.word == "message_bytes":
            head, _, attr = str(op.region.size).partition(".")
            holder = ops[at[head]] if 0 <= at.get(head, -1) < i else None
            if not isinstance(holder, ProtoBody) or message_size_slot(holder, attr) is None:
                return False
        if isinstance(op, MaskedBytes) and op.word == "masked_bytes" and not _mask_links_hold(
                op, ops[:i], at):
            return False
        if isinstance(op, Computed) and op.word == "switch_key":
            if not any(isinstance(o, Switch) and o.key == op.name and o.word in _SWITCH_WORDS
                       for o in ops[i + 1:]):
                return False
    return True


def _count_reads_earlier(steps: tuple[Step, ...], ops: tuple[AnyFieldOp, ...],
                         at: dict[str, int], i: int) -> bool:
    """Whether the program of the count of array ``ops[i]`` (not a ``count_of`` field's)
    reads only integer rows always there before it (the C codec reads them from the values
    on decode and from the slots on encode)."""
    for word, arg in steps:
        if word in ("param", "index", "has", "len", "attr"):
            return False
        if word == "field" and not (0 <= at.get(str(arg), -1) < i
                                    and ops[at[str(arg)]].word in _INT_WORDS):
            return False
    return True


# The rows a size_range row of the compiled codec cannot hold: they set or read the end of
# the region, or measure bytes after their own rows.
_NOT_IN_RANGE = frozenset({"size_range", "size_rest", "signed_size_rest", "checksum",
                           "skip_trailing"})


def range_end(op: AnyFieldOp) -> str | None:
    """The last field a size_range row measures (``size_of: {from, to}``), or None."""
    size_range = op.field.size_range if op.word == "size_range" else None
    return None if size_range is None else size_range[1]


def _range_holds(ops: tuple[AnyFieldOp, ...], i: int) -> bool:
    """Whether the size_range row ``ops[i]`` is one the compiled codec takes: an unsigned
    fixed-width integer always there, measuring the fields from the next one on, none of
    which sets or reads the region's end."""
    op = ops[i]
    inner = kind_op(op)
    size_range = op.field.size_range
    if (size_range is None or not isinstance(inner, ReadInt) or inner.int_type.signed
            or not unconditional(op.field) or i + 1 >= len(ops)
            or ops[i + 1].name != size_range[0]):
        return False
    last = next((k for k, o in enumerate(ops) if o.name == size_range[1]), -1)
    return last > i and all(o.word not in _NOT_IN_RANGE for o in ops[i + 1:last + 1])


def _after_its_bits(ops: tuple[AnyFieldOp, ...], i: int) -> bool:
    """Whether the bit field ``ops[i]`` follows its bits row, after its other parts only."""
    sub = ops[i]
    assert isinstance(sub, SubField)
    k = i - 1
    while k >= 0 and isinstance(ops[k], SubField) and ops[k].container == sub.container:  # type: ignore[union-attr]
        k -= 1
    return k >= 0 and ops[k].name == sub.container and ops[k].word == "bits"


# The rows holding the key of a masked_bytes row of the compiled codec.
_MASK_KEY_WORDS = frozenset({"int", "condition"})


def _mask_links_hold(op: MaskedBytes, before: tuple[AnyFieldOp, ...],
                     at: dict[str, int]) -> bool:
    """Whether a masked_bytes row's key is an earlier integer row (always there, or there when
    a condition or a guard holds) or bytes of a fixed length, and its size the rest, a size row
    measuring it (a field named as a size is one), or a derived integer."""
    k = at.get(op.key, -1)
    if not 0 <= k < len(before):
        return False
    key = before[k]
    if op.key_int is None:
        if not (key.word == "fixed" and isinstance(kind_op(key), BytesOther)):
            return False
    elif key.word == "guard":  # a row there when a bit field says (WebSocket's masked bit)
        if not isinstance(kind_op(key), ReadInt):
            return False
    elif key.word not in _MASK_KEY_WORDS:
        return False
    size = op.region.size
    if size == "rest":
        return True
    s = at.get(size or "", -1)
    if not 0 <= s < len(before):
        return False
    sizer = before[s]
    if isinstance(sizer, SizeOf):
        return sizer.word == "size" and sizer.target == op.name
    if isinstance(sizer, Bits):
        return sizer.word in ("derive", "derived_size") and not sizer.as_bool
    return False


# The words of the stored rows a rule (require:) of the compiled codec may read: their values
# are what the Python code's rule reads (the C code gives up on one that is not an integer, a
# bool, or bytes for len()).
_RULE_READS = frozenset({"int", "varint", "bool", "condition", "derive", "default", "int_when",
                         "default_bool", "bytes", "prefixed", "masked_bytes", "fixed", "lenenc",
                         "struct", "int_range", "bit_field"})


def rule_programs(plan: LayoutPlan) -> list[tuple[Step, ...]] | None:
    """The programs of ``plan``'s rules (``require:``), or None if one has none."""
    out = []
    for op in plan.ops:
        if isinstance(op, Requires):
            for expr in op.exprs:
                steps = guard_program(expr)
                if steps is None:
                    return None
                out.append(steps)
    return out


def rules_hold(plan: LayoutPlan) -> bool:
    """Whether every rule of ``plan`` has a program reading only stored fields the compiled
    codec holds the values of: integers and bools, bytes' lengths, has() of a nested struct."""
    programs = rule_programs(plan)
    if programs is None:
        return False
    words = {op.name: op.word for op in plan.field_ops}
    for steps in programs:
        for word, arg in steps:
            if word == "attr":
                return False
            if word in ("field", "len", "has") and words.get(str(arg)) not in _RULE_READS:
                return False
    return True


# The rows holding a protobuf message whose integer attributes a guarded row may read.
_MESSAGE_WORDS = frozenset({"proto_prefixed", "proto"})


def _guard_reads_earlier_rows(op: Condition, before: tuple[AnyFieldOp, ...],
                              at: dict[str, int]) -> bool:
    """Whether a guarded row's program reads only integer rows and messages' attributes
    before it."""
    for word, arg in guard_program(op.expr) or ():
        if word not in ("field", "attr", "len"):
            continue
        name = str(arg).split(".")[0]
        k = at.get(name, -1)
        if not 0 <= k < len(before):
            return False
        if word == "len":
            if not _bytes_row(before[k]):
                return False
        elif before[k].word not in (_INT_WORDS if word == "field" else _MESSAGE_WORDS):
            return False
    return True


def _bytes_row(op: AnyFieldOp) -> bool:
    """Whether ``op`` is a compiled row holding bytes (not text), whose length a row may read."""
    return op.word in ("prefixed", "bytes", "signed_bytes") and isinstance(
        kind_op(op), BytesOther | BytesSized | BytesToEnd)


# The words of the rows whose values a program of the rows TANK brought may read, and what
# they hold ("int" or "bool"; a row that may be None gives up when read as None).
_READABLE = {"int": "int", "varint": "int", "bool": "bool", "condition": "int", "value": "int",
             "marker": "bool"}


def _readable(op: AnyFieldOp) -> str | None:
    """What a program reading ``op``'s row reads: "int", "bool", or None if it may not."""
    if isinstance(op, Bits) and op.word in _DERIVE_WORDS:
        return "bool" if op.as_bool else "int"
    if isinstance(op, SubField) and op.word == "bit_field":
        # An enum's member is an int subclass the C programs do not read.
        return "bool" if op.as_bool else "int" if op.enum is None else None
    if isinstance(op, Condition) and op.word == "guard" and isinstance(op.inner,
                                                                       ReadInt | ReadVarint):
        return "int"
    return _READABLE.get(op.word)


def _arg_exprs(f: FrameField, plan: LayoutPlan) -> list[Expr] | None:
    """``f``'s arguments in the order of the params of ``plan``'s struct, or None if they are
    not exactly those params."""
    names = [p.name for p in plan.struct.params]
    if sorted(f.args) != sorted(names):
        return None
    return [f.args[name] for name in names]


# What a program of a row is, for the names it may read: a value (``value:``, run on encode
# only, reading any stored field and earlier values), an array item's arguments (which may
# name ``_index``), a guard's condition (earlier rows, and has() and len() of earlier stored
# fields), or another (earlier rows only).
ProgramUse = Literal["value", "item_args", "guard", ""]


def row_programs(op: AnyFieldOp) -> list[tuple[Expr, ProgramUse]] | None:
    """The expressions the rows of ``op`` run as programs, each with its use; None if its
    arguments are not its struct's params."""
    f = op.field
    out: list[tuple[Expr, ProgramUse]] = []
    inner = kind_op(op)
    if isinstance(op, Condition) and op.word == "guard" and f.when is not None:
        out.append((f.when, "guard"))
    if (isinstance(op, Computed) and op.word == "value" or op.word == "guard") and (
            f.value is not None):
        out.append((f.value, "value"))
    if isinstance(op, Bits) and op.word in _DERIVE_WORDS:
        out.append((op.expr, ""))
    if isinstance(op, SubField) and op.word == "bit_field" and f.value is not None:
        out.append((f.value, "value"))
    nested = inner.element if isinstance(inner, Array) else inner
    if f.args and isinstance(nested, Nested | NestedOther) and nested.plan is not None and (
            op.word in ("guard", "struct_args", "array_args")):
        args = _arg_exprs(f, nested.plan)
        if args is None:
            return None
        out += [(arg, "item_args" if op.word == "array_args" else "") for arg in args]
    return out


def programs_hold(plan: LayoutPlan) -> bool:
    """Whether the programs of the rows TANK brought read only what the compiled codec gives
    them (earlier integer rows, the struct's params, an array item's index), a derived integer
    comes out an int as Python's would, and those rows' counts and sizes are where their rows
    need them."""
    ops = plan.field_ops
    params = {p.name for p in plan.struct.params}
    at = {op.name: i for i, op in enumerate(ops)}
    stored = {op.name for op in ops if _readable(op) is not None and not _value_row(op)}
    # A value's program runs on encode, after the derived keys are found from their bodies.
    keys = {op.name for op in ops if op.word == "derived_key"}
    kinds: dict[str, str] = {}
    for i, op in enumerate(ops):
        exprs = row_programs(op)
        if exprs is None:
            return False
        for expr, use in exprs:
            steps = program(expr, extended=True, presence=use in ("value", "guard"))
            if steps is None:
                return False
            for word, arg in steps:
                name = str(arg)
                if word == "index" and use != "item_args":
                    return False
                if word == "field" and not (name in kinds or (name in params and name not in at)
                                            or (use == "value" and name in stored | keys)):
                    return False
                if word in ("has", "len") and not (
                        _presence_reads(ops, at, name, word)
                        and (use == "value" or at[name] < i)):
                    return False
        if isinstance(op, Bits) and op.word in _DERIVE_WORDS and not op.as_bool and (
                result_kind(op.expr, kinds) != "int"):
            return False
        if not _tank_links_hold(op, ops, at, params, i):
            return False
        kind = _readable(op)
        if kind is not None:
            kinds[op.name] = kind
    return True


def _presence_reads(ops: tuple[AnyFieldOp, ...], at: dict[str, int], name: str,
                    word: str) -> bool:
    """Whether a ``has`` or ``len`` step of a program run on encode reads a field the compiled
    codec stores (for ``len``, bytes: len() of anything else is the Python code's)."""
    k = at.get(name, -1)
    if k < 0:
        return False
    op = ops[k]
    if op.field.computed or not op.field.wire or op.word in ("bits", "bit_field_other"):
        return False
    if isinstance(op, SubField) and op.field.value is not None:
        return False
    if word == "len":
        return isinstance(kind_op(op), BytesOther | BytesSized | BytesToEnd | MaskedBytes) and (
            op.field.compression is None)
    return True


def _value_row(op: AnyFieldOp) -> bool:
    """Whether ``op`` is a value row: computed on encode, not stored."""
    return op.word == "value" or op.word == "guard" and op.field.value is not None


def _tank_links_hold(op: AnyFieldOp, ops: tuple[AnyFieldOp, ...], at: dict[str, int],
                     params: set[str], i: int) -> bool:
    """Whether an array_args row's count, and a size_of_struct row and the struct_sized row it
    measures, are where the compiled codec needs them."""
    inner = kind_op(op)
    if op.word in ("array_args", "guard") and isinstance(inner, Array) and (
            inner.count is not None) and isinstance(inner.element, Nested):
        count = inner.count.text.strip()
        if count in params and count not in at:
            return True
        k = at.get(count, -1)
        if 0 <= k < i and ops[k].word == "int" and not inner.count_from_field:
            return True  # a stored integer: encoding checks the list's length against it
        return 0 <= k < i and ops[k].word == "count_of" and ops[k].field.count_of == op.name
    if op.word == "size_of_struct":
        k = at.get(op.field.size_of or "", -1)
        return k > i and ops[k].word == "struct_sized" and isinstance(
            ops[k], NestedOther) and ops[k].region.size == op.name  # type: ignore[union-attr]
    if op.word == "struct_sized" and isinstance(op, NestedOther):
        k = at.get(op.region.size or "", -1)
        return 0 <= k < i and ops[k].word == "size_of_struct" and ops[k].field.size_of == op.name
    return True


def result_kind(expr: Expr, kinds: dict[str, str]) -> str | None:
    """"int" or "bool", what Python's value of ``expr`` is when its names hold what ``kinds``
    says (a param's, not known, is None), or None when that depends on the values."""
    if any(isinstance(node, ast.Constant) and isinstance(node.value, bool)
           for node in ast.walk(expr.tree)):
        return None  # the program holds a bool constant as 0 or 1
    stack: list[str | None] = []
    for word, arg in program(expr, extended=True) or ():
        if word == "field":
            stack.append(kinds.get(str(arg)))
        elif word in ("const", "index", "len"):
            stack.append("int")
        elif word == "has":
            stack.append("bool")
        elif word == "param":
            stack.append(None)
        elif word == "not":
            stack[-1] = "bool"
        elif word == "neg":
            stack[-1] = None if stack[-1] is None else "int"
        elif word == "select":
            b, _, a = stack.pop(), stack.pop(), stack.pop()
            stack.append(a if a == b else None)
        else:
            b, a = stack.pop(), stack.pop()
            if a is None or b is None:
                stack.append(None)
            elif word in ("bitand", "bitor", "bitxor", "orv", "andv"):
                # bool & bool is a bool; or/and give one of their values
                stack.append(a if a == b else None if word in ("orv", "andv") else "int")
            elif word in ("rshift", "lshift", "add", "sub"):
                stack.append("int")
            else:
                stack.append("bool")  # comparisons; and/or by truth join comparisons only
    return stack[0] if len(stack) == 1 else None


def guard_conditions(ops: list[AnyFieldOp]) -> list[AnyFieldOp]:
    """``ops`` with the conditions the ``condition`` row cannot take (it reads earlier
    integer, varint and bool rows only) lowered as guards (``Condition.guarded``)."""
    out: list[AnyFieldOp] = []
    words: dict[str, str] = {}
    for op in ops:
        if isinstance(op, Condition):
            steps = program(op.expr) if op.word == "condition" else None
            names = [str(arg) for word, arg in steps or () if word == "field"]
            # A condition reading a message's attribute or a length (TubeMQ's, Pravega's) has
            # no value program; it keeps its unguarded row (struct_when, int_when ...).
            if (steps is None or not all(words.get(name, "") in _INT_WORDS for name in names)) \
                    and program(op.expr, extended=True) is not None:
                op = replace(op, guarded=True)
            elif op.word == "condition_other" and guardable(guarded := replace(op, guarded=True)):
                # One testing has() of earlier fields (MariaDB's QueryResponse), which no
                # other row takes.
                op = guarded
        words[op.name] = op.word
        out.append(op)
    return out


# The protobuf integer kinds: a message_bytes row's size is one of these.
_PROTO_INTS = frozenset({"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
                         "fixed64", "sfixed32", "sfixed64"})


def message_size_slot(holder: ProtoBody, proto_name: str) -> str | None:
    """The slot of ``holder``'s message holding its field ``proto_name``, when that field is an
    integer kept in a slot of its own under its Python name (so the C codec reads and sets the
    slot where the Python code reads and sets the attribute), else None."""
    pf = next((x for x in holder.message.fields if x.proto_name == proto_name), None)
    if (pf is None or pf.type.kind not in _PROTO_INTS or pf.label is Label.REPEATED
            or pf.oneof is not None or pf.is_map or pf.storage != pf.py_name
            or pf in holder.message.sparse_fields()):
        return None
    return pf.storage


@dataclass(frozen=True)
class SpecPlans:
    """The plans of a spec's structs, nested structs before the structs holding them."""

    plans: tuple[LayoutPlan, ...]

    def __iter__(self) -> Iterator[LayoutPlan]:
        return iter(self.plans)

    def __getitem__(self, name: str) -> LayoutPlan:
        return next(p for p in self.plans if p.name == name)


def _int_types(op: Op) -> tuple[IntType, ...]:
    """The fixed-width integers an operation the C codec might take reads or writes: its own,
    a length prefix of its region's, and those of the operation a wrapper holds."""
    region = getattr(op, "region", None)
    own = (region.prefix,) if isinstance(region, Region) and isinstance(region.prefix,
                                                                         IntType) else ()
    match op:
        case ReadInt(int_type=t) | Const(int_type=t) | SizeOf(int_type=t) | SizeRest(
                int_type=t) | Checksum(int_type=t):
            return (*own, t)
        case Nested(when=IfPeek(int_type=t)):
            return (*own, t)
        case Wrap(inner=inner):
            return (*own, *_int_types(inner))
        case Blocks(count_type=count, length_type=length):
            return (*own, count, length)
    return own


def plan_spec(spec: FrameSpec) -> SpecPlans:
    """Lower every struct of ``spec`` (validated and named)."""
    plans: dict[str, LayoutPlan] = {}
    for s in dependency_order(spec):
        plans[s.name] = lower(s, plans, spec.byte_order)
    return SpecPlans(tuple(plans.values()))


def dependency_order(spec: FrameSpec) -> list[StructDef]:
    """Structs before the structs that contain them, so class bodies read top-down."""
    out: list[StructDef] = []
    seen: set[str] = set()

    def visit(s: StructDef) -> None:
        if s.name in seen:
            return
        seen.add(s.name)
        for f in s.fields:
            for dep in struct_refs(f):
                visit(dep)
        out.append(s)

    for s in spec.structs:
        visit(s)
    visit(spec.frame)
    return out


def lower(s: StructDef, plans: dict[str, LayoutPlan], byte_order: str) -> LayoutPlan:
    """``s``'s plan; ``plans`` holds those of the structs it nests."""
    fills = fills_region(s)
    field_ops = [_lower_field(s, f, plans, byte_order, fills) for f in s.fields]
    ops: list[PlanOp] = []
    if s.delimiter is not None:
        ops.append(Delimited(s.delimiter))
    if s.params:
        ops.append(Params(tuple(p.name for p in s.params),
                          all(p.kind in ("int", "bool") for p in s.params)))
    ops += guard_conditions(field_ops)
    if s.trailing == "ignore":
        ops.append(SkipTrailing())
    if s.requires:
        ops.append(Requires(tuple(r.expr for r in s.requires)))
    return LayoutPlan(s, tuple(ops), fills, reads_to_end(s))


def _exprs(f: FrameField) -> list[Expr | None]:
    """The expressions written on ``f``; all but ``value:`` are evaluated on decode too."""
    exprs = [f.value, f.when, f.derive, *f.args.values()]
    if isinstance(f, ArrayField):
        exprs.append(f.count)
        if f.element is not None:
            exprs += f.element.args.values()
    return exprs


def _expr_names(exprs: list[Expr | None]) -> set[str]:
    return {name for expr in exprs if expr is not None for name in expr.names}


def decode_names(s: StructDef) -> set[str]:
    """The fields of ``s`` that decoding reads again after reading them: named by a condition,
    a count, a derivation or an argument (``value:`` is evaluated on encode only), or used as a
    size, a switch key or a compression reference."""
    names: set[str] = set()
    for f in s.fields:
        names |= _expr_names([e for e in _exprs(f) if e is not f.value])
        refs = [f.size, f.switch_on if isinstance(f, SwitchField) else None]
        if f.compression is not None:
            refs += [f.compression.codec, f.compression.uncompressed_size]
        names.update(ref.split(".")[0] for ref in refs if ref is not None)
    return names


def fills_region(s: StructDef) -> bool:
    return any(g.size == "rest" or _to_end(g) or g.when_remaining or g.size_of == "rest"
               for g in s.fields)


def _to_end(f: FrameField) -> bool:
    """An ``until_end`` array that no ``size_of`` field bounds reads to the region's end."""
    return isinstance(f, ArrayField) and f.until_end and f.size in (None, "rest")


def reads_to_end(s: StructDef) -> bool:
    """Whether decoding ``s`` ends at its region's end (see ``LayoutPlan.reads_to_end``)."""
    index = {g.name: i for i, g in enumerate(s.fields)}
    ranges = [(index[g.size_range[0]], index[g.size_range[1]]) for g in s.fields
              if g.size_range is not None]
    for i, f in enumerate(s.fields):
        if not f.wire:
            continue
        if isinstance(f, IntField | VarintField | BoolField) and f.size_of == "rest":
            return True  # it sets the end, inside a range or not
        if any(start <= i <= stop for start, stop in ranges):
            continue  # runs to the end of the range, which the range's size checks
        if f.when_remaining or _to_end(f):
            return True
        if f.length is not None or f.terminator is not None:
            continue  # a terminated field ends at its terminator
        if isinstance(f, BytesField | StringField | ProtoField):
            if f.size == "rest" or f.size is None and f.prefix is None:
                return True
        elif isinstance(f, StructField | SwitchField) and f.size == "rest":
            return True
    return False


def _early(s: StructDef, f: FrameField, fills: bool) -> bool:
    """A checksum whose range starts right after it and runs to the end of a struct that fills
    its region can be verified before the content is parsed."""
    if f.checksum is None or not fills:
        return False
    names = [g.name for g in s.fields]
    i = names.index(f.name)
    return i + 1 < len(names) and names[i + 1] == f.checksum.start


def _modifier(f: FrameField, inner: KindOp) -> AnyFieldOp:
    """The operation of a field something beyond its kind makes Python-only, else ``inner``,
    the operation of its kind."""
    if f.when is not None:
        return Condition(f, inner, f.when)
    for how, present in (("value", f.value is not None), ("count_of", f.count_of is not None),
                         ("size_range", f.size_range is not None),
                         ("switch_key", f.is_switch_key)):
        if present:
            return Computed(f, inner, how)
    if f.args:
        return WithArgs(f, inner)
    if f.prefix is not None:
        return Prefix(f, inner, f.prefix)
    if f.length is not None:
        return FixedLength(f, inner, f.length)
    if f.default is not None:
        return Default(f, inner)
    if f.marker:
        return Marker(f, inner)
    return inner


def _region(f: FrameField, byte_order: str) -> Region:
    size_field = f.size_field
    prefix: IntType | Literal["varint", "lenenc"] | None = None
    if f.prefix == "varint":
        prefix = "varint"
    elif f.prefix == "lenenc":
        prefix = "lenenc"
    elif f.prefix is not None:
        width, signed = INT_TYPES[f.prefix]
        prefix = IntType(width, signed, byte_order)
    return Region(f.length, f.size,
                  isinstance(size_field, VarintField)
                  or isinstance(size_field, IntField) and not size_field.signed,
                  size_field is not None and size_field.wire, prefix, f.nullable)


def _earlier_unsigned_size(s: StructDef, f: FrameField) -> str | None:
    """The unsigned size field of ``s`` before ``f`` that sizes it, if that is how it is sized."""
    if f.size is None or f.size == "rest" or "." in f.size:
        return None
    size = s.field(f.size)
    if (isinstance(size, IntField) and size.size_of == f.name and not size.signed
            and s.fields.index(size) < s.fields.index(f)):
        return f.size
    return None


def _lower_field(s: StructDef, f: FrameField, plans: dict[str, LayoutPlan], byte_order: str,
                 fills: bool) -> AnyFieldOp:
    if f.bit_of is not None:
        slot = f.bit_of
        enum = slot.enum.name if slot.enum is not None and not f.computed else None
        return SubField(f, slot.container, slot.shift, slot.width, isinstance(f, BoolField),
                        enum)
    if not f.wire:
        assert f.derive is not None
        return Bits(f, f.derive, isinstance(f, BoolField))
    kind = _lower_kind(s, f, plans, byte_order, fills)
    op = _modifier(f, kind)
    if op is kind and f.optional and isinstance(f, IntField | ProtoField | BytesField):
        return OptionalScalar(f, kind)
    return op


def _lower_kind(s: StructDef, f: FrameField, plans: dict[str, LayoutPlan], byte_order: str,
                fills: bool) -> KindOp:
    """The operation of ``f``'s kind, which says how its value is read and written."""
    region = _region(f, byte_order)
    match f:
        case IntField():
            int_type = IntType(f.width, f.signed, f.order)
            if f.bits:
                return ReadPacked(f, int_type, f.reserved_mask)
            if f.const is not None:
                return Const(f, int_type, f.const)
            if f.checksum is not None:
                return Checksum(f, int_type, f.checksum.algorithm, f.checksum.start,
                                _early(s, f, fills))
            if f.size_of == "rest":
                return SizeRest(f, int_type, size_extra(s, f))
            if f.size_of is not None:
                return SizeOf(f, int_type, f.size_of,
                              isinstance(s.field(f.size_of), ProtoField | BytesField),
                              size_extra(s, f))
            return _ranged(f, int_type) or ReadInt(f, int_type)
        case ProtoField():
            size = _earlier_unsigned_size(s, f)
            if f.message is None or size is None:
                return ProtoOther(f, region)
            if f.dispatch_on is None:
                return ProtoBody(f, f.message, size, region)
            sparse = {g.number for g in f.message.sparse_fields()}
            slot = f.message.present.slot if f.message.present is not None else None
            present = slot if slot and all(c.field.number in sparse for c in f.commands) \
                else None
            return Envelope(f, f.message, size, f.dispatch_on.py_name, present, region)
        case BytesField() | StringField() if (f.const_data is not None
                                              or f.terminator is not None):
            return _const_or_terminated(f, region)
        case BytesField() if f.mask_key is not None:
            key = f.mask_key
            key_int = IntType(key.width, False, key.order) if isinstance(key, IntField) else None
            return MaskedBytes(f, region, key.name, key_int, key.optional)
        case BytesField():
            if f.size == "rest":
                return BytesToEnd(f, region)
            size = _earlier_unsigned_size(s, f)
            if f.compression is not None or size is None:
                return BytesOther(f, region)
            return BytesSized(f, size, region)
        case StructField():
            held = f.struct
            if held is None:
                raise AssertionError(f"{f.name!r}: an unresolved struct")
            if held.name not in plans or f.size is not None:
                return NestedOther(f, held, region, plans.get(held.name))
            when: Presence
            if f.when_peek is not None:
                kind, equals = f.when_peek
                width, signed = INT_TYPES[kind]
                when = IfPeek(IntType(width, signed, byte_order), equals)
            elif f.when_remaining:
                when = IfRemaining()
            elif f.optional:
                return NestedOther(f, held, region, plans[held.name])
            else:
                when = Always()
            return Nested(f, plans[held.name], when, region)
        case VarintField(encoding="lenenc"):
            return ReadLenenc(f, f.const, f.nullable)
        case VarintField():
            if f.const is None and (ranged := _ranged(f, "varint")) is not None:
                return ranged
            sizes_struct = f.size_of not in (None, "rest") and isinstance(
                s.field(f.size_of or ""), StructField)
            return ReadVarint(f, f.const, f.size_of == "rest", f.max_bytes, size_extra(s, f),
                              sizes_struct)
        case BoolField():
            return ReadBool(f, f.const, f.size_of == "rest")
        case UuidField():
            return ReadUuid(f)
        case FloatField(width=width, order=order):
            return ReadFloat(f, width, order)
        case StringField():
            return String(f, f.encoding, region)
        case ArrayField():
            if f.element is None:
                raise AssertionError(f"{f.name!r}: an array without an element")
            return Array(f, _lower_kind(s, f.element, plans, byte_order, fills), f.count,
                         f.until_end, f.count_from_field,
                         any("_index" in e.names for e in f.args.values()), region,
                         f.terminator, f.terminator_value, f.min_items, f.max_items)
        case SwitchField():
            if f.switch_on is None:
                raise AssertionError(f"{f.name!r}: a switch without a key")
            return Switch(f, f.switch_on, any(c.directional for c in f.cases), region)
        case BlocksField():
            if f.struct is None:
                raise AssertionError(f"{f.name!r}: blocks of an unresolved struct")
            (cw, cs), (lw, ls) = INT_TYPES[f.block_count], INT_TYPES[f.block_length]
            return Blocks(f, f.struct, IntType(cw, cs, byte_order), IntType(lw, ls, byte_order),
                          f.block_size, f.max_blocks)
    raise AssertionError(f"{f.name!r}: no operation for a {f.kind} field")


def _ranged(f: FrameField, shape: IntType | Literal["varint"]) -> RangedInt | None:
    """A stored integer with ``min:``/``max:``/``nonzero:`` that rule out a value its type
    holds, or None (bounds equal to the type's own are left out)."""
    low, high = int_bounds(f)
    lo = f.min_value if f.min_value is not None and f.min_value > low else None
    hi = f.max_value if f.max_value is not None and f.max_value < high else None
    nonzero = f.nonzero and (lo if lo is not None else low) <= 0 <= (hi if hi is not None
                                                                      else high)
    if lo is None and hi is None and not nonzero:
        return None
    return RangedInt(f, shape, lo, hi, nonzero)


def _const_or_terminated(f: FrameField, region: Region) -> ConstBytes | Terminated:
    """A constant string or bytes (its whole wire form), or a terminated one."""
    if f.const_data is None:
        assert f.terminator is not None
        return Terminated(f, isinstance(f, StringField),
                          f.encoding if isinstance(f, StringField) else "", f.terminator)
    data = f.const_data
    if region.prefix == "varint":
        data = varint_bytes(len(data)) + data
    elif region.prefix == "lenenc":
        data = lenenc_bytes(len(data)) + data
    elif region.prefix is not None:
        p = region.prefix
        data = len(data).to_bytes(p.width, "little" if p.order == "little" else "big",
                                  signed=p.signed) + data
    return ConstBytes(f, data + (f.terminator or b""))
