"""The Python view of a spec's request/response pairs (``client.py``).

One typed coroutine per declared request: it builds the command from keyword arguments,
numbers it with the spec's allocated id field, sends it through any object with an async
``send_frame`` and waits for the answer the correlation fields pick out. Error responses
become ``RequestFailed``; a closed connection fails every waiting request.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable
from dataclasses import dataclass, field

from protoframe.generator.codewriter import Imports, docstring, q
from protoframe.generator.first_client import awaited_first
from protoframe.generator.first_machines import received_type
from protoframe.generator.frame_ir import (
    ArrayField,
    BoolField,
    BytesField,
    FloatField,
    FrameField,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    SwitchField,
    UuidField,
    VarintField,
    nested_struct,
)
from protoframe.generator.ir import Field, Label, Presence
from protoframe.generator.linefit import INDENT, fit_marked
from protoframe.generator.machines_routes import builder_name, builder_params
from protoframe.generator.runtime_modules import CORRELATION, ERRORS, MACHINE
from protoframe.generator.spec_ir import CommandInfo, FrameSpec, Request


@dataclass
class MethodView:
    """One request method; the ``*_lines`` are fitted at the depth the template prints them."""

    name: str
    params: list[str]  # parameter declarations after self
    doc: str
    request: str
    response: str
    response_type: str
    body_lines: list[str]
    key_expr: str
    returns: str = ""  # the method's return annotation, when not response_type
    response_test: str = ""  # when the answer is returned, when not name == response
    until: str = ""  # for a streamed answer: the frozenset of the commands that end it
    errors: str = ""  # for a streamed answer: the tuple of its error commands
    iter_name: str = ""  # for a streamed answer: the method yielding it as it arrives
    iter_doc: str = ""
    param_lines: list[str] = field(init=False)
    body_fitted: list[str] = field(init=False)  # body_lines as printed
    call_lines: list[str] = field(init=False)  # the arguments of self._call(...)
    answer_lines: list[str] = field(init=False)  # the answer's check
    test_lines: list[str] = field(init=False)  # the response_test's if, when there is one
    collect_lines: list[str] = field(init=False)  # the arguments of self._collect(...)
    iter_param_lines: list[str] = field(init=False)  # the iterator method's parameters
    iter_body: list[str] = field(init=False)  # body_lines as the iterator method prints them
    stream_lines: list[str] = field(init=False)  # the arguments of self._stream(...)

    def __post_init__(self) -> None:
        self.param_lines = _at(2, (f"{p}," for p in self.params))
        self.body_fitted = _at(2, self.body_lines)
        self.call_lines = _at(3, [f"({q(self.request)}, {self.key_expr}), frame, timeout, "
                                  f"{q(self.request)}"])
        self.answer_lines = _at(3, [f"assert isinstance(answer, {self.response_type})"])
        self.test_lines = _at(2, [f"if {self.response_test}:"] if self.response_test else [])
        self.collect_lines = _at(3, [f"({q(self.request)}, {self.key_expr}), frame, timeout, "
                                     f"{q(self.request)}, {self.until},"] if self.until else [])
        self.iter_param_lines = _at(2, (f"{p}," for p in [*self.params, _MAX_BUFFERED]))
        # An async generator returns without a value: a one-way exit yields nothing.
        self.iter_body = _at(2, ("    return" if line == _ONE_WAY_RETURN else line
                                 for line in self.body_lines))
        self.stream_lines = _at(3, [f"({q(self.request)}, {self.key_expr}), frame, timeout, "
                                    f"{q(self.request)}, {self.until}, max_buffered,"]
                                if self.until else [])

    @property
    def iter_returns(self) -> str:
        return f"AsyncGenerator[{self.response_type}, None]"


# How many messages of a stream the iterator method buffers unread by default.
_MAX_BUFFERED = "max_buffered: int = 1024"


def _at(depth: int, lines: Iterable[str]) -> list[str]:
    """``lines`` as statements ``depth`` levels in, each fitted there."""
    return [out for line in lines for out in fit_marked(INDENT * depth + line)]


@dataclass
class ClientModuleView:
    source: str
    module_doc: str
    class_name: str
    class_doc: str
    import_lines: list[str]
    methods: list[MethodView]
    allocate: str | None
    exports: list[str]
    allocator_args: str = ""  # the id range, for an allocated field narrower than 64 bits
    answer_arg: str = "body"  # what field_of reads correlation fields from
    handle_frame_doc: str = ""
    streams: bool = False  # some request is answered by a stream (``_collect``, ``_stream``)
    # The template's lines naming the frame class, each fitted at its depth there.
    lines: dict[str, list[str]] = field(default_factory=dict)


class _Types:
    def __init__(self, spec: FrameSpec) -> None:
        self.spec = spec
        self.imports = Imports()

    def proto(self, full_name: str, py_path: str) -> str:
        module = self.spec.proto_modules[full_name]
        self.imports.use(".", module)
        return f"{module}.{py_path}"

    def body_type(self, info: CommandInfo) -> str:
        msg = info.body_message
        if msg is not None:
            return self.proto(msg.full_name, msg.py_path)
        return f"frames.{info.body_type}"

    def field_ann(self, f: Field) -> str:
        t = f.type
        if t.kind == "enum" and t.enum is not None:
            value = self.proto(t.enum.full_name, t.enum.py_path)
        elif t.kind == "message" and t.message is not None:
            value = self.proto(t.message.full_name, t.message.py_path)
        else:
            value = {"string": "str", "bytes": "bytes", "bool": "bool", "float": "float",
                     "double": "float"}.get(t.kind, "int")
        if f.is_map and f.map_key is not None and f.map_value is not None:
            return "dict[Any, Any]"
        if f.label is Label.REPEATED:
            return f"list[{value}]"
        return value


def build_client_module(spec: FrameSpec) -> ClientModuleView:
    types = _Types(spec)
    imports = types.imports
    # What the template's skeleton (FrameSender, the requests class, _ANSWERS) names.
    imports.use("collections.abc", "Hashable")
    imports.use("typing", "Any")
    imports.use("typing", "Protocol")
    imports.use(CORRELATION, "IdAllocator")
    imports.use(CORRELATION, "RequestTable")
    imports.use(MACHINE, "answering")
    imports.use(ERRORS, "RequestFailed")
    imports.use(".", "frames")
    imports.use(".commands", "INTERACTIONS")
    imports.use(".machines", "command_of")
    imports.use(".machines", "field_of")
    frame_extra = [f for f in spec.frame.data_fields
                   if not (isinstance(f, ProtoField) and f.dispatch_on is not None)
                   and not isinstance(f, SwitchField)]
    methods = [_method(spec, types, r, frame_extra) for r in spec.requests]
    sent = received_type(spec)  # the frame, or the frame or a first message
    first_lines = awaited_first(spec, imports)
    title = "".join(p.capitalize() for p in spec.protocol.replace("-", "_").split("_"))
    if spec.frame_context:
        imports.use(".machines", "Command")  # in answer_arg
    if any(r.until for r in spec.requests):  # what _stream and the iterator methods name
        imports.use("collections.abc", "AsyncGenerator")
        imports.use(CORRELATION, "AnswerStream")
    # More than the two names every client imports from machines are listed one per line, as
    # this module always listed them.
    if len(imports.names(".machines")) > 2:
        imports.list_one_per_line(".machines")
    return ClientModuleView(
        source=spec.path,
        module_doc=docstring(
            f"Typed request methods of the {spec.protocol} protocol, generated from "
            f"{spec.path}.\n\nEach method sends one request and returns the answer the spec "
            "pairs with it, correlated by the spec's fields; the transport is any object with "
            "``async send_frame(frame)`` that passes received frames to ``handle_frame``.", ""),
        class_name=f"{title}Requests",
        class_doc=docstring(
            f"Typed requests over one {spec.protocol} connection.\n\nFeed every received frame "
            "to ``handle_frame``; call ``connection_lost`` when the connection ends so that no "
            "request is left waiting.", "    "),
        import_lines=imports.block(),
        methods=methods,
        allocate=spec.allocate,
        exports=[f"{title}Requests", "FrameSender"],
        lines={
            "send_frame": _at(1, [f"async def send_frame(self, frame: {sent})"
                                  " -> None: ..."]),
            # The parameters of a signature the template has broken after its "(".
            "handle_params": _at(2, [f"self, frame: {sent}, "
                                     "command: tuple[str, Any] | None = None"]
                                 if sent == f"frames.{spec.frame.name}" else
                                 ["self,", f"frame: {sent},",
                                  "command: tuple[str, Any] | None = None,"]),
            "call_params": _at(2, [f"self, key: Hashable, frame: {sent}, "
                                   "timeout: float | None, what: str"]),
            "collect_frame": _at(2, [f"frame: {sent},"]),
            **first_lines,
            "stream_call": _at(2, ["answers = self.pending.stream(key, lambda answer: "
                                   "answer[0] in until, limit, self.timeout if timeout is "
                                   "None else timeout, what)"]),
        },
        allocator_args=_allocator_args(spec),
        answer_arg="Command(body, frame)" if spec.frame_context else "body",
        streams=any(r.until for r in spec.requests),
        handle_frame_doc=docstring(
            "Complete the request ``frame`` answers; return False if it answers none.\n\n"
            "``command`` is the frame's ``(name, body)`` when the caller has it already: "
            f"``{title}Protocol.command(frame)`` gives, for a frame its ``receive_data`` "
            "returned, the command the machines decoded, so that the body is not decoded a "
            "second time. Without it the frame is named here with ``command_of``.", "        "),
    )


# Ids a protobuf field of these types can hold; the rest are 64-bit, and ids stay below 2**63
# there (what a Java peer's signed long holds), the allocator's default.
_PROTO_ID_LIMITS = {"int32": 1 << 31, "sint32": 1 << 31, "sfixed32": 1 << 31,
                    "uint32": 1 << 32, "fixed32": 1 << 32}
_DEFAULT_ID_LIMIT = 1 << 63


def _allocator_args(spec: FrameSpec) -> str:
    """``IdAllocator``'s range when a field the ids go into is narrower than 64 bits.

    One allocator numbers every request of a connection, so the narrowest such field wins: a
    u32 request id (TANK's body field, TubeMQ's frame serial number) wraps at 2**32.
    """
    if spec.allocate is None:
        return ""
    limits = [_DEFAULT_ID_LIMIT]
    for r in spec.requests:
        info = spec.commands[r.request]
        if not r.allocate:
            continue
        if info.routed is not None:
            limits += [_frame_id_limit(f) for _, f in builder_params(info.routed)
                       if f.name == spec.allocate]
            if info.body_message is not None:
                limits += [_PROTO_ID_LIMITS.get(f.type.kind, _DEFAULT_ID_LIMIT)
                           for f in info.body_message.fields if f.proto_name == spec.allocate]
            continue
        if info.proto is not None:
            limits += [_PROTO_ID_LIMITS.get(f.type.kind, _DEFAULT_ID_LIMIT)
                       for f in info.proto.message.fields if f.proto_name == spec.allocate]
        elif info.case is not None:
            struct = info.layout(True) or info.layouts[0]
            limits += [_frame_id_limit(f) for f in struct.data_fields
                       if f.name == spec.allocate]
        if spec.allocate in r.frame_correlate:
            frame_field = spec.frame.field(spec.allocate)
            assert frame_field is not None
            limits.append(_frame_id_limit(frame_field))
    limit = min(limits)
    args = [] if limit == _DEFAULT_ID_LIMIT else [f"1 << {limit.bit_length() - 1}"]
    if spec.allocate_start:
        args.append(f"start={spec.allocate_start}")
    if spec.allocate_skip_zero:
        args.append("skip_zero=True")
    return ", ".join(args)


def _frame_id_limit(f: FrameField) -> int:
    """How many ids a frame integer holds (varints and 64-bit fields: the default)."""
    if not isinstance(f, IntField):
        return _DEFAULT_ID_LIMIT
    if f.bit_of is not None:  # a bit sub-field holds its own bits' worth
        return min(1 << f.bit_of.width, _DEFAULT_ID_LIMIT)
    return min(1 << (8 * f.width - f.signed), _DEFAULT_ID_LIMIT)


# Names a request method's body uses itself: a parameter named so gets a trailing underscore.
_METHOD_NAMES = frozenset({"self", "timeout", "body", "frame", "name", "answer", "request",
                           "answers", "stream", "max_buffered"})


def _param_name(name: str, taken: set[str]) -> str:
    out = name
    if keyword.iskeyword(out) or out in _METHOD_NAMES:
        out += "_"
    while out in taken:
        out += "_"
    taken.add(out)
    return out


def _method(spec: FrameSpec, types: _Types, r: Request,
            frame_extra: list[FrameField]) -> MethodView:
    info = spec.commands[r.request]
    response = spec.commands[r.response]
    required: list[str] = []
    optional: list[str] = []
    assigns: list[str] = []
    taken: set[str] = set()
    key_values: list[str] = []
    if info.routed is not None:
        return _routed_method(spec, types, r, info, response)
    allocate = spec.allocates(r)
    if info.proto is not None:
        msg = info.proto.message
        for f in msg.fields:
            if f.proto_name == allocate:
                assigns.append(f"{f.py_name}={f.py_name}")
                continue
            pname = _param_name(f.py_name, taken)
            ann = types.field_ann(f)
            if f.presence is Presence.REQUIRED:
                required.append(f"{pname}: {ann}")
            elif f.presence is Presence.IMPLICIT:
                optional.append(f"{pname}: {ann} = {_zero(ann)}")
            else:
                optional.append(f"{pname}: {ann} | None = None")
            assigns.append(f"{f.py_name}={pname}")
        body_type = types.body_type(info)
        build = [f"body = {body_type}(" + ", ".join(assigns) + ")"]
        envelope = next(f for f in spec.frame.fields
                        if isinstance(f, ProtoField) and f.dispatch_on is not None)
        assert envelope.message is not None and envelope.dispatch_on is not None
        env_type = types.proto(envelope.message.full_name, envelope.message.py_path)
        enum = envelope.dispatch_on.type.enum
        assert enum is not None
        enum_ref = types.proto(enum.full_name, enum.py_path)
        command = (f"{env_type}({envelope.dispatch_on.py_name}={enum_ref}."
                   f"{info.proto.enum_member}, {info.proto.field.py_name}=body)")
        frame_args = [f"{envelope.name}={command}"]
        correlate_attr = {f.proto_name: f"body.{f.py_name}" for f in msg.fields}
    elif info.first is not None:
        # A first message is sent as it is: its struct is the request.
        first = spec.first[info.first]
        build = [f"body = frames.{first.name}(" + ", ".join(
            _struct_params(types, first, allocate, taken, required, optional)) + ")"]
        frame_args = []
        correlate_attr = {sf.name: f"body.{sf.name}" for sf in first.data_fields}
    else:
        assert info.case is not None
        # A request travels to the server: use that direction's layout where they differ.
        struct: StructDef = info.layout(True) or info.layouts[0]
        assigns = _struct_params(types, struct, allocate, taken, required, optional)
        build = [f"body = frames.{struct.name}(" + ", ".join(assigns) + ")"]
        switch = next(f for f in spec.frame.fields if isinstance(f, SwitchField))
        frame_args = [f"{switch.name}=body"]
        correlate_attr = {sf.name: f"body.{sf.name}" for sf in struct.data_fields}
    for extra in (f for f in frame_extra if f.name in r.frame_fields):
        pname = _param_name(extra.name, taken)
        ann = _struct_ann(types, extra)
        if extra.optional or extra.nullable:
            optional.append(f"{pname}: {ann} | None = None")
        else:  # a frame field that is always there (the flags of a header's bits:)
            required.append(f"{pname}: {ann}")
        frame_args.append(f"{extra.name}={pname}")
    allocated = allocate is not None and allocate in (info.body_fields or {})
    for c in r.frame_correlate:
        # A correlation field of the frame itself: numbered here, or given by the caller.
        if c == allocate:
            allocated = True
            frame_args.append(f"{c}={c}")
            continue
        frame_field = spec.frame.field(c)
        assert frame_field is not None
        pname = _param_name(c, taken)
        required.append(f"{pname}: {_struct_ann(types, frame_field)}")
        frame_args.append(f"{c}={pname}")
    for c in r.correlate:
        key_values.append(f"frame.{c}" if c in r.frame_correlate else correlate_attr[c])
    lines = []
    if allocated:
        lines.append(f"{allocate} = self.next_id()")
    lines += build
    lines.append("frame = body" if info.first is not None else
                 f"frame = frames.{spec.frame.name}(" + ", ".join(frame_args) + ")")
    key = "(" + ", ".join(key_values) + ("," if len(key_values) == 1 else "") + ")"
    response_type = " | ".join(_answer_type(types, spec.commands[n])
                               for n in dict.fromkeys([*r.responses, *r.until]))
    params = [*required, "*", *optional, "timeout: float | None = None"] if optional or True \
        else required
    doc = (_returned(r)
           + (f"; raises ``RequestFailed`` on {', '.join(r.errors)}" if r.errors else "")
           + ".")
    lines += _one_way_exit(spec, r, "body")
    return MethodView(
        name=r.method,
        params=params,
        doc=docstring(doc + _one_way_doc(r), "        "),
        request=r.request,
        response=r.response,
        response_type=response_type,
        body_lines=lines,
        key_expr=key,
        returns=_returns(r, response_type),
        response_test=_response_test(r),
        **_stream_args(r, _one_way_doc(r, iterator=True)),
    )


def _struct_params(types: _Types, struct: StructDef, allocate: str | None, taken: set[str],
                   required: list[str], optional: list[str]) -> list[str]:
    """The method's parameters for the data fields of ``struct`` (added to ``required`` and
    ``optional``) and the arguments building it from them."""
    assigns: list[str] = []
    for sf in struct.data_fields:
        if sf.name == allocate:
            assigns.append(f"{sf.name}={sf.name}")
            continue
        pname = _param_name(sf.name, taken)
        ann = _struct_ann(types, sf)
        if sf.when_remaining and sf.default is not None:
            default = q(sf.default) if isinstance(sf.default, str) else repr(sf.default)
            optional.append(f"{pname}: {ann} = {default}")
        elif sf.optional:
            optional.append(f"{pname}: {ann} | None = None")
        else:
            required.append(f"{pname}: {ann}")
        assigns.append(f"{sf.name}={pname}")
    return assigns


def _returned(r: Request) -> str:
    if r.until:
        return (f"Send {r.request} and return the bodies of its stream: every "
                f"{' or '.join(r.responses)} until {' or '.join(r.until)}, that one included")
    return f"Send {r.request} and return its {' or '.join(r.responses)}"


def _stream_args(r: Request, doc: str) -> dict[str, str]:
    """What a method answered by a stream passes ``_collect`` and ``_stream``, the errors it
    checks, and its iterator method."""
    if not r.until:
        return {}
    errors = "".join(q(e) + ", " for e in r.errors)
    assert r.iter_method is not None
    return {"until": "frozenset({" + ", ".join(q(n) for n in r.until) + "})",
            "errors": f"({errors})", "iter_name": r.iter_method,
            "iter_doc": docstring(_iter_doc(r, doc), "        ")}


def _iter_doc(r: Request, one_way: str) -> str:
    """The iterator method's docstring; ``one_way`` says when it is not answered."""
    errors = (f" {' or '.join(r.errors)} raises ``RequestFailed`` where it comes (the rest of "
              "the stream is then swallowed)." if r.errors else "")
    return (f"Send {r.request} and yield each body of its stream as it arrives: every "
            f"{' or '.join(r.responses)} until {' or '.join(r.until)}, that one included."
            f"{errors}{one_way}\n\n``timeout`` bounds each wait for the next message "
            "(``RequestTimeout``); more than ``max_buffered`` messages received and not yet "
            "read fail the stream with ``StreamOverflow`` once those are read. Leaving the loop "
            "early (``break``, an exception, a cancelled task) swallows the rest of the "
            "stream when the generator is closed (at once under ``contextlib.aclosing``), so "
            "the next request gets only its own answers.")


def _answer_type(types: _Types, info: CommandInfo) -> str:
    layout = info.layout(False)
    return f"frames.{layout.name}" if layout is not None else types.body_type(info)


def _returns(r: Request, response_type: str) -> str:
    if r.until:
        streamed = f"list[{response_type}]"
        return f"{streamed} | None" if r.when is not None else streamed
    return f"{response_type} | None" if r.when is not None or r.choices else ""


def _response_test(r: Request) -> str:
    """The answers a request chose (one of its ``response:`` list): only those are returned;
    another answer, though it came for the request, fails it."""
    if not r.choices:
        return ""
    names = ", ".join(q(n) for n in r.responses)
    return f"name in ({names}) and name in expected"


def _one_way_exit(spec: FrameSpec, r: Request, body: str) -> list[str]:
    """For a request answered only when its ``when:`` holds: send it and return None when it
    does not, so that nothing waits for an answer that never comes."""
    if r.when is None and not r.choices:
        return []
    index = next(i for i, other in enumerate(spec.requests) if other is r)
    seen = f"Command({body}, frame)" if spec.frame_context else body
    return [f"expected = INTERACTIONS[{index}].expected({seen}, field_of)",
            "if not expected:",
            "    await self.transport.send_frame(frame)",
            _ONE_WAY_RETURN]


_ONE_WAY_RETURN = "    return None"  # the last line of a one-way exit


def _one_way_doc(r: Request, iterator: bool = False) -> str:
    out = ""
    if r.choices:
        out += " The request's fields choose the answer: " + "; ".join(
            f"{c} when {w.text}" for c, w in r.choices) + "."
    if r.when is not None and iterator:
        out += f" Unless {r.when.text}, it is not answered: yield nothing."
    elif r.when is not None:
        out += f" Unless {r.when.text}, it is not answered: return None."
    elif r.choices:
        out += " When none holds, it is not answered: return None."
    return out


def _routed_method(spec: FrameSpec, types: _Types, r: Request, info: CommandInfo,
                   response: CommandInfo) -> MethodView:
    """A request named inside the frame: the caller passes the whole body (for a payload
    route, the message that travels serialized) and the frame fields the builder takes."""
    routed = info.routed
    assert routed is not None
    taken = {"request"}
    required = [f"request: {types.body_type(info)}"]
    args = []
    lines = []
    allocate = spec.allocates(r)
    params = builder_params(routed)
    if allocate in info.body_fields and all(f.name != allocate for _, f in params):
        # The caller passes the whole body: the id goes into it, as into a body built here.
        lines.append(f"request.{info.body_fields[allocate]} = self.next_id()")
    for pname, f in params:
        if f.name == allocate:
            lines.append(f"{f.name} = self.next_id()")
            args.append(f"{pname}={f.name}")
            continue
        local = _param_name(f.name, taken)
        required.append(f"{local}: {_struct_ann(types, f)}")
        args.append(f"{pname}={local}")
    kwargs = "".join(f", {a}" for a in args)
    builder = builder_name(r.request)
    types.imports.use(".machines", builder)
    lines.append(f"frame = {builder}(request{kwargs})")
    body_attrs = {k: f"request.{v}" for k, v in info.body_fields.items()}
    key = [f"frame.{c}" if c in r.frame_correlate else body_attrs[c] for c in r.correlate]
    doc = (_returned(r)
           + (f"; raises ``RequestFailed`` on {', '.join(r.errors)}" if r.errors else "")
           + ".")
    lines += _one_way_exit(spec, r, "request")
    response_type = " | ".join(types.body_type(spec.commands[n])
                               for n in dict.fromkeys([*r.responses, *r.until]))
    return MethodView(
        name=r.method,
        params=[*required, "*", "timeout: float | None = None"],
        doc=docstring(doc + _one_way_doc(r), "        "),
        request=r.request,
        response=r.response,
        response_type=response_type,
        body_lines=lines,
        key_expr="(" + ", ".join(key) + ("," if len(key) == 1 else "") + ")",
        returns=_returns(r, response_type),
        response_test=_response_test(r),
        **_stream_args(r, _one_way_doc(r, iterator=True)),
    )


def _zero(ann: str) -> str:
    return {"str": '""', "bytes": 'b""', "bool": "False", "float": "0.0"}.get(ann, "0")


def _struct_ann(types: _Types, f: FrameField) -> str:
    if f.bit_of is not None and f.bit_of.enum is not None:
        return f"frames.{f.bit_of.enum.name}"
    if isinstance(f, IntField | VarintField):
        return "int"
    if isinstance(f, BoolField):
        return "bool"
    if isinstance(f, FloatField):
        return "float"
    if isinstance(f, BytesField):
        return "bytes"
    if isinstance(f, StringField):
        return "str"
    if isinstance(f, UuidField):
        types.imports.use("uuid", "UUID")
        return "UUID"
    if isinstance(f, ProtoField) and f.message is not None:
        return types.proto(f.message.full_name, f.message.py_path)
    if (held := nested_struct(f)) is not None:
        return f"frames.{held.name}"
    if isinstance(f, ArrayField) and f.element is not None:
        return f"list[{_struct_ann(types, f.element)}]"
    return "Any"

