"""The spec-level intermediate representation: what one spec declares around its structs.

Dotted paths through a frame (``FramePath``), routed commands and how a sender builds them
(``commands:``, ``set:``), requests (``interactions:``), state machines (``machines:``), the
command table (``CommandInfo``) and the whole spec (``FrameSpec``). The structs and their
fields are in ``frame_ir``; ``frame_model`` builds both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protoframe.generator.expr import Expr
from protoframe.generator.frame_bits import FrameEnum
from protoframe.generator.frame_ir import Case, FrameField, ProtoCommand, StructDef
from protoframe.generator.ir import EnumType, EnumValue, Field, MessageType, SourceLocation


@dataclass
class PathStep:
    """One link of a dotted path through a frame: a struct field or a protobuf field."""

    name: str  # as the spec writes it (a .proto name for protobuf fields)
    attr: str  # the Python attribute
    optional: bool  # the attribute may be None
    frame_field: FrameField | None = None
    proto_field: Field | None = None


@dataclass
class FramePath:
    """A resolved dotted path (``content.request.body.method``) from a struct or message.

    ``struct``/``message`` is what the path ends at when that is a struct (a struct or blocks
    field) or a protobuf message; both are None for a scalar.
    """

    text: str
    steps: list[PathStep]
    struct: StructDef | None = None
    message: MessageType | None = None

    @property
    def optional(self) -> bool:
        return any(s.optional for s in self.steps)

    @property
    def last(self) -> PathStep:
        return self.steps[-1]


@dataclass
class Assignment:
    """A value a sender writes into a routed command's frame (``set:``)."""

    path: FramePath  # from the frame
    value: int | bool | str  # an expression's text when ``expr`` is set
    enum: tuple[EnumType, EnumValue] | None  # for an enum field: its type and the member named
    location: SourceLocation
    # ``{expr: ...}``: worked out by the builder from the body and its arguments
    # (``route_values``); None for a constant.
    expr: Expr | None = None


@dataclass
class BuildLeaf:
    """What a builder writes into one field of a routed command's frame.

    ``kind``: ``const`` (an ``Assignment``), ``on`` (the command's value), ``payload`` (the
    body, serialized), ``body`` (the body itself) or ``param`` (a frame data field the
    builder takes as an argument).
    """

    kind: str
    assignment: Assignment | None = None
    param: FrameField | None = None  # the frame field a param fills


@dataclass
class BuildNode:
    """One struct or message a routed command's builder constructs, and its fields' values.

    ``values`` maps the Python attribute to a nested node or a leaf, in field order; fields
    not listed keep their defaults (they are optional).
    """

    struct: StructDef | None
    message: MessageType | None
    values: list[tuple[str, BuildNode | BuildLeaf]] = field(default_factory=list)


@dataclass
class RoutedCommand:
    """A command named by a value inside the frame (a ``commands:`` route)."""

    name: str
    value: int | None  # None for a route with a single, unnamed-by-value command
    message: MessageType | None  # the body's message, serialized in the route's payload
    sets: list[Assignment]
    location: SourceLocation
    build: BuildNode | None = None  # how a sender builds the frame, when it can be built
    params: list[FrameField] = field(default_factory=list)  # frame fields the builder takes


@dataclass
class Route:
    """How frames without a command field of their own name their command (``commands:``).

    The route applies to a frame when every optional link of ``part`` (the ``in:`` path) is
    present; ``on`` and ``payload`` are paths from that part. Without ``on`` the route names
    one command, whose body is the part itself.
    """

    index: int
    part: FramePath
    on: FramePath | None
    payload: FramePath | None
    sets: list[Assignment]
    commands: list[RoutedCommand]
    location: SourceLocation


@dataclass
class Request:
    request: str
    response: str
    errors: list[str]
    correlate: list[str]  # every correlation field, in spec order
    method: str
    # The subset of ``correlate`` that are data fields of the frame itself (e.g. a serial
    # number in the frame header) rather than fields of the command bodies.
    frame_correlate: list[str] = field(default_factory=list)
    # Frame data fields besides the command that the generated method takes (Pulsar: payload).
    frame_fields: list[str] = field(default_factory=list)
    # When the request is answered at all (over its own fields); None: always.
    when: Expr | None = None
    allocate: bool = True  # False: the caller gives the allocated field (``allocate: false``)
    # Answers the request's own fields choose between, as (command, when); ``response`` is
    # the first of them. Empty: ``response`` always answers.
    choices: list[tuple[str, Expr]] = field(default_factory=list)
    # Commands that end a streamed answer (``until:``); empty: one answer ends the request.
    until: list[str] = field(default_factory=list)

    @property
    def responses(self) -> list[str]:
        """Every command that may answer the request successfully."""
        return [c for c, _ in self.choices] if self.choices else [self.response]

    @property
    def iter_method(self) -> str | None:
        """For a streamed answer, the client method that yields it as it arrives."""
        return f"{self.method}_iter" if self.until else None


@dataclass
class Transition:
    sources: list[str]
    target: str
    send: str | None
    receive: str | None
    event: str | None
    when: Expr | None
    location: SourceLocation


@dataclass
class Machine:
    name: str
    doc: str
    key: str | None
    initial: str
    states: list[str]
    transitions: list[Transition]


@dataclass
class FrameSpec:
    """Everything one YAML spec declares."""

    protocol: str
    doc: str
    path: str
    byte_order: str
    max_frame_size: int
    structs: list[StructDef]
    frame: StructDef
    commands: dict[str, CommandInfo]
    allocate: str | None
    requests: list[Request]
    one_way: list[str]
    server_push: list[str]
    machines: list[Machine]
    proto_modules: dict[str, str]  # full name of a proto type -> generated module
    enums_used: list[EnumType] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)  # commands named inside the frame
    # The enum whose newest value is the protocol version (``protocol_version:``), if named.
    protocol_version: EnumType | None = None
    allocate_start: int = 0  # the first id the client allocates
    allocate_skip_zero: bool = False  # ids never 0, also after wrapping
    frame_enums: list[FrameEnum] = field(default_factory=list)  # the spec's own (``enums:``)
    # ``first:``: the first message's struct by direction (``to_server``, ``to_client``).
    first: dict[str, StructDef] = field(default_factory=dict)

    def allocates(self, r: Request) -> str | None:
        """The field a request's method numbers itself, if any."""
        return self.allocate if r.allocate else None

    @property
    def frame_context(self) -> bool:
        """Whether some answer is correlated by a field of the frame rather than of its body,
        so the machines and the client look at the frame too."""
        return any(r.frame_correlate for r in self.requests)


@dataclass
class CommandInfo:
    """A command the interactions and machines can name, and how to find its body."""

    name: str
    value: int
    body_type: str  # Python type of the body (a proto message or a struct)
    body_fields: dict[str, str]  # spec field name -> Python attribute on the body
    proto: ProtoCommand | None = None
    case: Case | None = None
    # For a case named per direction: the direction of the one layout this command carries.
    direction: str | None = None
    route: Route | None = None
    routed: RoutedCommand | None = None
    # A first message (``first:``): the direction it is sent, "to_server" or "to_client".
    first: str | None = None

    @property
    def layouts(self) -> list[StructDef]:
        """The case layouts the body can be, to-server first ([] for other commands)."""
        return self.case.layouts(self.direction) if self.case is not None else []

    def layout(self, to_server: bool) -> StructDef | None:
        """The case layout of the body sent that way (None: the command never goes so)."""
        direction = "to_server" if to_server else "to_client"
        if self.case is None or self.direction not in (None, direction):
            return None
        return self.case.to_server if to_server else self.case.to_client

    @property
    def body_message(self) -> MessageType | None:
        """The protobuf message of the body, when the body is one."""
        if self.proto is not None:
            return self.proto.message
        if self.routed is not None and self.route is not None:
            return self.routed.message or self.route.part.message
        return None
