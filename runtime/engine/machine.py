"""A protocol-agnostic engine for the state machines that specs declare.

Generated code describes each machine (states, transitions, how to find an entity's key in a
command) and the request/response pairs; this engine keeps one state per entity, follows
responses back to the entity whose request they answer, and refuses a command that arrives in
a state where the spec does not allow it. It holds no sockets and does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeAlias, TypeVar

from protoframe.runtime.errors import ProtoframeError, UnknownCommandError


class ProtocolViolation(ProtoframeError):
    """A command was sent or received in a state where the protocol does not allow it."""

    def __init__(self, machine: str, key: Hashable, state: str, direction: str,
                 command: str) -> None:
        state = str(state)  # a generated state enum member (a StrEnum) reads as its value
        who = machine if key is None else f"{machine} {key!r}"
        super().__init__(f"{who}: cannot {direction} {command} in state {state!r}")
        self.machine = machine
        self.key = key
        self.state = state
        self.direction = direction
        self.command = command


class Direction(Enum):
    """Which way a command travels, from the point of view of the side that runs the engine."""

    SEND = "send"
    RECEIVE = "receive"

    def flipped(self) -> Direction:
        return Direction.RECEIVE if self is Direction.SEND else Direction.SEND


F = TypeVar("F")

# What a generated protocol does with a received frame it cannot accept: the machines refuse it
# (``ProtocolViolation``) or no command of the spec is named by it (``UnknownCommandError``).
# Return True to keep the frame (it is dispatched and returned as if allowed), False to drop it,
# or raise to fail the read; ``refuse``, the default, raises the error.
ViolationPolicy: TypeAlias = Callable[[ProtocolViolation | UnknownCommandError, F], bool]


def refuse(error: ProtocolViolation | UnknownCommandError, frame: object) -> bool:
    """The default violation policy: the read fails with ``error``."""
    raise error


def hook_table(hooks: object, names: Mapping[str, str]) -> dict[str, Callable[[Any, Any], None]]:
    """The methods of ``hooks`` by the command each handles (``names``: command -> method name):
    only those it defines, so that a command without a hook costs one failed lookup."""
    table: dict[str, Callable[[Any, Any], None]] = {}
    if hooks is None:
        return table
    for command, method in names.items():
        hook = getattr(hooks, method, None)
        if hook is not None:
            table[command] = hook
    return table


Guard = Callable[[Any], bool]
KeyOf = Callable[[str, Any], Hashable]
# How many ended entities per machine keep their final state readable (``MachineSet.state``).
FINISHED_KEPT = 1024
NO_KEY: Hashable = object()  # "this command says nothing about this machine's entities"


@dataclass(frozen=True)
class Rule:
    """One transition: in ``source``, on a command (or a named event), go to ``target``."""

    source: str
    target: str
    direction: Direction | None
    command: str | None
    event: str | None = None
    guard: Guard | None = None


@dataclass
class MachineDef:
    """A machine as the spec declares it, from the client's point of view."""

    name: str
    initial: str
    rules: list[Rule]
    key_of: KeyOf | None  # None for a machine with a single, keyless entity
    index: dict[tuple[str, Direction | None, str], list[Rule]] = field(default_factory=dict)
    vocabulary: set[tuple[Direction, str]] = field(default_factory=set)
    terminal: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        sources = {r.source for r in self.rules}
        for rule in self.rules:
            what = rule.command if rule.command is not None else f"event:{rule.event}"
            self.index.setdefault((rule.source, rule.direction, what), []).append(rule)
            if rule.direction is not None and rule.command is not None:
                self.vocabulary.add((rule.direction, rule.command))
        self.terminal = {r.target for r in self.rules} - sources


# Reads one field of a command by name (the generated ``field_of`` bound to one body).
FieldGetter = Callable[[str], Any]


@dataclass(frozen=True)
class Interaction:
    """A request and the commands that may answer it, matched on ``correlate`` fields.

    ``answered``, when given, tells from the request's fields whether the peer answers this
    one at all (MQTT's PUBLISH is answered only above QoS 0): a request it refuses is one-way,
    so nothing waits for an answer that never comes. ``choose``, when given, picks from the
    request's fields the commands that may answer this one (delivery level 1: an ack, level
    2: a receipt; errors always), none for a request the peer does not answer. ``until``,
    when not empty, makes the answer a stream: the request stays pending, and its owners see
    each answer, until one of these commands ends it.
    """

    request: str
    answers: frozenset[str]
    correlate: tuple[str, ...]
    answered: Callable[[FieldGetter], bool] | None = None
    choose: Callable[[FieldGetter], frozenset[str]] | None = None
    until: frozenset[str] = frozenset()

    def expected(self, body: Any, field_of: Callable[[Any, str], Any]) -> frozenset[str]:
        """The commands that may answer this request as ``body`` says; empty: one-way."""
        if self.answered is None and self.choose is None:
            return self.answers

        def field(name: str) -> Any:
            return field_of(body, name)

        if self.answered is not None and not self.answered(field):
            return frozenset()
        return self.answers if self.choose is None else self.choose(field)

    def expects_answer(self, body: Any, field_of: Callable[[Any, str], Any]) -> bool:
        """Whether this request, as ``body`` says, waits for an answer."""
        return bool(self.expected(body, field_of))


def answering(interactions: list[Interaction]) -> dict[str, tuple[Interaction, ...]]:
    """For each answering command, the interactions it may answer: correlated ones first, so
    that an answer carrying ids never goes to a request waiting for an uncorrelated answer."""
    found: dict[str, list[Interaction]] = {}
    for i in sorted(interactions, key=lambda i: not i.correlate):
        for name in sorted(i.answers):
            found.setdefault(name, []).append(i)
    return {name: tuple(found[name]) for name in sorted(found)}


class MachineSet:
    """The states of every entity on one connection, for one side (client or server)."""

    def __init__(self, machines: list[MachineDef], interactions: list[Interaction],
                 field_of: Callable[[Any, str], Any], server: bool = False) -> None:
        self.machines = {m.name: m for m in machines}
        self.interactions = interactions
        self.server = server
        self._field_of = field_of
        self.states: dict[str, dict[Hashable, str]] = {m.name: {} for m in machines}
        # The final state each entity reached, for the most recent FINISHED_KEPT of them: an
        # entity in a final state is forgotten (its id may be used again, starting over), but
        # asking for its state still says where it ended rather than the initial state.
        self.finished: dict[str, dict[Hashable, str]] = {m.name: {} for m in machines}
        # Per request and correlation values, for each request sent, the commands that may
        # answer it and the instances that took it (machine -> key): its answer goes back to
        # each of them.
        self._pending: dict[tuple[str, tuple[Any, ...]],
                            list[tuple[frozenset[str], dict[str, Hashable]]]] = {}
        self._by_request = {i.request: i for i in interactions}
        self._answering = answering(interactions)

    @property
    def pending(self) -> int:
        """How many requests sent are still waiting for their answer."""
        return sum(len(waiting) for waiting in self._pending.values())

    def state(self, machine: str, key: Hashable = None) -> str:
        """Current state of one entity: the final state it reached if it ended (and has not
        started over since), the initial state if it was never seen."""
        current = self.states[machine].get(key)
        if current is not None:
            return current
        return self.finished[machine].get(key, self.machines[machine].initial)

    def sent(self, command: str, body: Any) -> None:
        """Record a command this side sends; raises ``ProtocolViolation`` if not allowed."""
        self._apply(Direction.RECEIVE if self.server else Direction.SEND, command, body)

    def received(self, command: str, body: Any) -> None:
        """Record a command this side received; raises ``ProtocolViolation`` if not allowed."""
        self._apply(Direction.SEND if self.server else Direction.RECEIVE, command, body)

    def event(self, machine: str, name: str, key: Hashable = None) -> None:
        """Apply a named event (such as ``close``) to one entity."""
        m = self.machines[machine]
        state = self.states[machine].get(key, m.initial)  # an ended entity starts over
        rules = m.index.get((state, None, f"event:{name}"))
        if not rules:
            raise ProtocolViolation(machine, key, state, "handle event", name)
        self._move(m, key, rules[0].target)

    def _apply(self, direction: Direction, command: str, body: Any) -> None:
        # Requests travel to the server and answers back (RECEIVE from the client's side, for
        # either side): a command going the other way is never an answer, even when it shares
        # an answer's name and ids (TANK's PRODUCE, Pravega's KEEP_ALIVE), so it must not
        # complete a pending request of its own side.
        answer = direction is Direction.RECEIVE and command in self._answering
        routed = self._route_answer(command, body) if answer else None
        for m in self.machines.values():
            if (direction, command) not in m.vocabulary:
                continue
            if routed is not None and m.name in routed:
                key: Hashable = routed[m.name]
            elif routed is not None and m.key_of is not None:
                continue  # the answer is another entity's: this one's key is not in it
            elif m.key_of is None:
                if answer and self._owned_elsewhere(command, m.name):
                    continue
                key = None
            else:
                key = m.key_of(command, body)
                if key is NO_KEY:
                    continue
            self._transition(m, key, direction, command, body)
        request = self._by_request.get(command)
        expected = request.expected(body, self._field_of) \
            if request is not None and direction is Direction.SEND else frozenset()
        if request is not None and expected:
            owners = self._owners(command, body)
            values = tuple(self._field_of(body, f) for f in request.correlate)
            self._pending.setdefault((command, values), []).append((expected, owners))

    def _owned_elsewhere(self, command: str, machine: str) -> bool:
        # A keyless machine (the connection) sees an answer only if nothing else claimed it.
        return any(self.machines[n].key_of is not None for n in self.machines if n != machine
                   and any(c == command for _, c in self.machines[n].vocabulary))

    def _owners(self, command: str, body: Any) -> dict[str, Hashable]:
        """Every instance a request is applied to, by machine: each sees the answer."""
        owners: dict[str, Hashable] = {}
        for m in self.machines.values():
            if (Direction.SEND, command) in m.vocabulary or \
                    (Direction.RECEIVE, command) in m.vocabulary:
                if m.key_of is None:
                    owners[m.name] = None
                    continue
                key = m.key_of(command, body)
                if key is not NO_KEY:
                    owners[m.name] = key
        return owners

    def _route_answer(self, command: str, body: Any) -> dict[str, Hashable] | None:
        """The instances (machine -> key) whose pending request this command answers, if any."""
        for interaction in self._answering.get(command, ()):
            values = tuple(self._field_of(body, f) for f in interaction.correlate)
            waiting = self._pending.get((interaction.request, values), [])
            # The oldest request this command may answer: a receipt does not complete a
            # request that chose an ack.
            found = next((i for i, (expected, _) in enumerate(waiting) if command in expected),
                         None)
            if found is not None:
                if interaction.until and command not in interaction.until:
                    return waiting[found][1] or None  # the stream goes on
                _, owners = waiting.pop(found)
                if not waiting:
                    del self._pending[(interaction.request, values)]
                return owners or None
        return None

    def _transition(self, m: MachineDef, key: Hashable, direction: Direction, command: str,
                    body: Any) -> None:
        state = self.states[m.name].get(key, m.initial)
        for rule in m.index.get((state, direction, command), []):
            if rule.guard is None or rule.guard(body):
                self._move(m, key, rule.target)
                return
        raise ProtocolViolation(m.name, key, state, direction.value, command)

    def _move(self, m: MachineDef, key: Hashable, target: str) -> None:
        # Entities that reach a final state are forgotten, so their ids can be used again; the
        # state they ended in stays readable, for a bounded number of them.
        finished = self.finished[m.name]
        if target in m.terminal:
            self.states[m.name].pop(key, None)
            finished.pop(key, None)
            finished[key] = target
            if len(finished) > FINISHED_KEPT:
                del finished[next(iter(finished))]
        else:
            self.states[m.name][key] = target
            finished.pop(key, None)
