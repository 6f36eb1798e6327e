"""The protocol page's sequence diagrams, derived from each machine.

A diagram follows the path from the machine's initial state to its "main" state (the
reachable non-final state with the most self-transitions), the commands that state allows
(request/response pairs grouped), and the cheapest path on to a final state, preferring
request/response pairs over single commands and single commands over events.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from protoframe.generator.docs_machines import final_states
from protoframe.generator.docs_text import code, expr_text, join, mermaid_text
from protoframe.generator.spec_ir import FrameSpec, Machine, Request, Transition


@dataclass
class SequenceView:
    anchor: str
    title: str
    summary: str
    diagram: list[str]


@dataclass(frozen=True)
class _Edge:
    """One transition from one source state."""

    order: int
    source: str
    t: Transition

    @property
    def target(self) -> str:
        return self.t.target

    @property
    def direction(self) -> str:
        return "send" if self.t.send is not None else \
            "receive" if self.t.receive is not None else "event"

    @property
    def command(self) -> str:
        return self.t.send or self.t.receive or self.t.event or ""


@dataclass(frozen=True)
class _Move:
    """One step of a path: a single transition, or a request and the answer to it."""

    first: _Edge
    answer: _Edge | None = None
    request: Request | None = None

    @property
    def target(self) -> str:
        return (self.answer or self.first).target


@dataclass
class _Seq:
    spec: FrameSpec
    m: Machine
    edges: list[_Edge]
    terminal: set[str]
    requests: dict[str, Request]
    lines: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # in the order they are drawn
    depth: int = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def out(self, e: _Edge) -> list[_Edge]:
        return [x for x in self.edges if x.source == e.source]

    def from_state(self, state: str) -> list[_Edge]:
        return [x for x in self.edges if x.source == state]

    # -- moves ------------------------------------------------------------------------------
    def answers(self, req: _Edge, r: Request) -> list[_Edge]:
        """Edges leaving the request's target that answer it, in the opposite direction."""
        want = "receive" if req.direction == "send" else "send"
        names = [*r.responses, *r.errors]
        return [x for x in self.from_state(req.target)
                if x.direction == want and x.command in names and x is not req]

    def moves(self, state: str) -> list[tuple[int, _Move]]:
        """(cost, move) pairs leaving ``state``, in spec order."""
        out: list[tuple[int, _Move]] = []
        for e in self.from_state(state):
            r = self.requests.get(e.command) if e.direction != "event" else None
            if r is not None:
                for a in self.answers(e, r):
                    if a.target != state:
                        out.append((1, _Move(e, a, r)))
            if e.target != state:
                out.append((2 if e.direction == "send" else 3, _Move(e)))
        return out

    def cheapest(self, start: str, goals: set[str]) -> list[_Move] | None:
        if start in goals:
            return []
        counter = itertools.count()
        heap: list[tuple[int, int, str, list[_Move]]] = [(0, next(counter), start, [])]
        done: set[str] = set()
        while heap:
            cost, _, state, path = heapq.heappop(heap)
            if state in goals:
                return path
            if state in done:
                continue
            done.add(state)
            for c, mv in self.moves(state):
                if mv.target not in done:
                    heapq.heappush(heap, (cost + c, next(counter), mv.target, [*path, mv]))
        return None

    def walk(self, start: str) -> list[_Move]:
        """Cheapest moves onwards, each to a state not yet seen, until one returns to a
        state seen before (or none is left): a machine without final states cycles."""
        seen = {start}
        out: list[_Move] = []
        state = start
        while True:
            moves = sorted(self.moves(state), key=lambda cm: cm[0])
            if not moves:
                return out
            fresh = [mv for _, mv in moves if mv.target not in seen]
            mv = fresh[0] if fresh else moves[0][1]
            out.append(mv)
            if mv.target in seen:
                return out
            seen.add(mv.target)
            state = mv.target

    def main_state(self) -> str | None:
        """The reachable non-final state with the most self-transitions (closest on ties)."""
        order = [self.m.initial]
        for state in order:
            for e in self.from_state(state):
                if e.target not in order:
                    order.append(e.target)
        best, best_count = None, 0
        for state in order:
            if state in self.terminal:
                continue
            count = sum(1 for e in self.from_state(state) if e.target == state)
            if count > best_count:
                best, best_count = state, count
        return best

    # -- labels -----------------------------------------------------------------------------
    def label(self, e: _Edge, r: Request | None, guard: bool = True) -> str:
        if r is None and e.direction == "send":
            r = self.requests.get(e.command)  # a request drawn without its answer
        fields = list(r.correlate) if r is not None else []
        info = self.spec.commands.get(e.command)
        if self.m.key is not None and info is not None and self.m.key in info.body_fields \
                and self.m.key not in fields:
            fields.append(self.m.key)
        text = e.command + (f" ({', '.join(fields)})" if fields else "")
        if guard and e.t.when is not None:
            text += f" [{expr_text(e.t.when)}]"
        return mermaid_text(text)

    def alt_label(self, e: _Edge) -> str:
        text = e.command
        if e.t.when is not None:
            text += f" if {expr_text(e.t.when)}"
        return mermaid_text(text)

    # -- drawing ----------------------------------------------------------------------------
    def arrow(self, e: _Edge, r: Request | None, answer: bool, guard: bool = True) -> None:
        if e.direction == "event":
            self.emit(f"Note over Client: event {mermaid_text(e.command)}")
            return
        line = "-->>" if answer else "->>"
        a, b = ("Client", "Server") if e.direction == "send" else ("Server", "Client")
        self.emit(f"{a}{line}{b}: {self.label(e, r, guard)}")
        if e.command not in self.commands:
            self.commands.append(e.command)

    def state_note(self, state: str) -> None:
        final = " (final)" if state in self.terminal else ""
        self.emit(f"Note over Client: {self.m.name} {state}{final}")

    def step(self, e: _Edge, r: Request | None, answer: bool, current: str,
             guard: bool = True) -> None:
        self.arrow(e, r, answer, guard)
        if e.target != current:
            self.state_note(e.target)

    def choice(self, chosen: _Edge, others: list[_Edge], r: Request | None, answer: bool,
               current: str) -> None:
        """Draw ``chosen``; alternatives after which the entity is gone as ``break``, the
        others next to it as ``alt``."""
        stops = [o for o in others if o.target in self.terminal
                 and chosen.target not in self.terminal]
        alts = [o for o in others if o not in stops]
        for o in stops:
            self.emit(f"break {self.alt_label(o)}")
            self.depth += 1
            self.step(o, r, answer, current, guard=False)
            self.depth -= 1
            self.emit("end")
        if not alts:
            self.step(chosen, r, answer, current)
            return
        for i, e in enumerate([chosen, *alts]):
            self.emit(f"{'alt' if i == 0 else 'else'} {self.alt_label(e)}")
            self.depth += 1
            self.step(e, r, answer, current, guard=False)
            self.depth -= 1
        self.emit("end")

    def move(self, mv: _Move) -> None:
        current = mv.first.source
        if mv.answer is None:
            others = [x for x in self.out(mv.first) if x is not mv.first
                      and x.direction == mv.first.direction and x.command == mv.first.command]
            self.choice(mv.first, others, None, False, current)
            return
        assert mv.request is not None
        self.step(mv.first, mv.request, False, current)
        others = [x for x in self.answers(mv.first, mv.request) if x is not mv.answer]
        self.choice(mv.answer, others, mv.request, True, mv.first.target)

    def loop(self, state: str) -> None:
        """The commands ``state`` allows without leaving it, requests next to their answers."""
        loops = [e for e in self.from_state(state) if e.target == state]
        if not loops:
            return
        self.emit(f"loop while {state}")
        self.depth += 1

        def request_of(e: _Edge) -> Request | None:
            return self.requests.get(e.command) if e.direction != "event" else None

        # Answers to the client's requests are drawn with each request they answer, never
        # on their own (several requests may share one answer).
        answering = {a.order for e in loops if e.direction == "send"
                     for r in [request_of(e)] if r is not None for a in self.answers(e, r)}
        used: set[int] = set()
        for e in loops:
            if e.order in used or (e.direction == "receive" and e.order in answering):
                continue
            used.add(e.order)
            r = request_of(e)
            answers = self.answers(e, r) if r is not None else []
            if e.direction == "receive":  # the server asks, the client answers
                answers = [a for a in answers if a.order not in used]
            if r is None or not answers:
                self.arrow(e, None, False)
                continue
            self.arrow(e, r, False)
            used.update(a.order for a in answers)
            if len(answers) == 1:
                self.arrow(answers[0], r, True)
                continue
            for i, a in enumerate(answers):
                self.emit(f"{'alt' if i == 0 else 'else'} {self.alt_label(a)}")
                self.depth += 1
                self.arrow(a, r, True, guard=False)
                self.depth -= 1
            self.emit("end")
        self.depth -= 1
        self.emit("end")


def sequence_view(spec: FrameSpec, m: Machine, anchor: str) -> SequenceView:
    edges = [_Edge(i, source, t) for i, (t, source) in
             enumerate((t, s) for t in m.transitions for s in t.sources)]
    requests = {r.request: r for r in spec.requests}
    seq = _Seq(spec, m, edges, final_states(m), requests)
    seq.depth = 1
    seq.emit("participant Client")
    seq.emit("participant Server")
    if m.key is not None:
        seq.emit(f"Note over Client,Server: one {m.name} per {m.key}")
    seq.state_note(m.initial)
    main = seq.main_state()
    path: list[_Move] = []
    if main is not None:
        path = seq.cheapest(m.initial, {main}) or []
    states = [m.initial]

    def follow(moves: list[_Move]) -> None:
        for mv in moves:
            seq.move(mv)
            for e in (mv.first, mv.answer):
                if e is not None and e.target != states[-1]:
                    states.append(e.target)

    follow(path)
    here = states[-1]
    if main is not None and here == main:
        seq.loop(main)
    rest = seq.cheapest(here, seq.terminal)
    if rest is None:
        follow(seq.walk(here))
        seq.emit(f"Note over Client: no final state is reachable from {here}")
    else:
        follow(rest)
    title = f"{m.name}: {' → '.join(states)}"
    summary = (f"Commands drawn: {join(code(c) for c in seq.commands) or 'none'}"
               + (f"; main state `{main}`" if main is not None else "") + ".")
    return SequenceView(anchor=anchor, title=title, summary=summary, diagram=seq.lines)
