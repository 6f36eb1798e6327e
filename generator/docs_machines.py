"""The protocol page's state machines: a Mermaid state diagram, the transition table and
facts (final states, the key and which commands reach an instance, unanswerable requests).
"""

from __future__ import annotations

from dataclasses import dataclass

from protoframe.generator.docs_text import Table, cell, code, expr_text, join, mermaid_text
from protoframe.generator.spec_ir import FrameSpec, Machine, Transition

# Words Mermaid's state diagram lexer reads as keywords (case-insensitively) before it reads
# a state id; a state with one of these names is drawn through an alias.
_MERMAID_STATE_KEYWORDS = frozenset(
    {"click", "href", "default", "state", "note", "scale", "class", "classdef", "style",
     "direction", "end"})


@dataclass
class MachineView:
    anchor: str
    name: str
    doc: str
    facts: list[str]  # Markdown list items
    diagram: list[str]  # Mermaid lines after the header line
    transitions: Table


def final_states(m: Machine) -> set[str]:
    """Final states: reached but never left (the runtime forgets entities there)."""
    sources = {s for t in m.transitions for s in t.sources}
    return {t.target for t in m.transitions} - sources


def _trigger(t: Transition) -> str:
    if t.send is not None:
        text = f"send {t.send}"
    elif t.receive is not None:
        text = f"receive {t.receive}"
    else:
        text = f"event {t.event}"
    if t.when is not None:
        text += f" [{expr_text(t.when)}]"
    return text


def _state_ids(m: Machine) -> dict[str, str]:
    ids: dict[str, str] = {}
    taken = set(m.states)
    for s in m.states:
        if s.lower() in _MERMAID_STATE_KEYWORDS:
            alias = f"st_{s}"
            while alias in taken:
                alias += "_"
            taken.add(alias)
            ids[s] = alias
        else:
            ids[s] = s
    return ids


def machine_view(spec: FrameSpec, m: Machine, anchor: str) -> MachineView:
    ids = _state_ids(m)
    terminal = final_states(m)
    diagram: list[str] = []
    for s in m.states:
        if ids[s] != s:
            diagram.append(f'state "{s}" as {ids[s]}')
        else:
            diagram.append(s)
    diagram.append(f"[*] --> {ids[m.initial]}")
    for t in m.transitions:
        for source in t.sources:
            diagram.append(f"{ids[source]} --> {ids[t.target]}: {mermaid_text(_trigger(t))}")
    for s in m.states:
        if s in terminal:
            diagram.append(f"{ids[s]} --> [*]")
    rows = [[join(code(s) for s in t.sources), cell(_trigger(t)), code(t.target)]
            for t in m.transitions]
    facts = [f"States: {join(code(s) for s in m.states)}; initial `{m.initial}`; final "
             f"(never left; the entity is forgotten there): "
             f"{join(code(s) for s in m.states if s in terminal) or 'none'}."]
    facts += _key_facts(spec, m)
    requests = {r.request: r for r in spec.requests}
    flagged: set[tuple[str, str]] = set()
    for t in m.transitions:
        r = requests.get(t.send or "")
        if r is None or (t.target, r.request) in flagged:
            continue
        flagged.add((t.target, r.request))
        answers = [*r.responses, *r.errors]
        accepted = {u.receive for u in m.transitions if t.target in u.sources}
        if not accepted & set(answers):
            facts.append(f"No transition from `{t.target}` accepts an answer to `{r.request}` "
                         f"({join(code(a) for a in answers)}), so an answer routed back to this "
                         "machine is refused with `ProtocolViolation`.")
    return MachineView(
        anchor=anchor,
        name=m.name,
        doc=m.doc.strip(),
        facts=facts,
        diagram=diagram,
        transitions=Table(["from", "on", "to"], rows),
    )


def _vocabulary(m: Machine) -> list[str]:
    out: list[str] = []
    for t in m.transitions:
        for cmd in (t.send, t.receive):
            if cmd is not None and cmd not in out:
                out.append(cmd)
    return out


def _key_facts(spec: FrameSpec, m: Machine) -> list[str]:
    if m.key is None:
        return ["Key: none; one instance per connection."]
    key = m.key
    vocab = _vocabulary(m)
    keyed = sorted(n for n in vocab if n in spec.commands and key in spec.commands[n].body_fields)
    # An answer without the key reaches the instance that sent the request it answers, which
    # works when that request carries the key (the runtime records its owner when it is sent).
    routed = sorted(n for n in vocab if n not in keyed and any(
        n in (*r.responses, *r.errors) and r.request in keyed for r in spec.requests))
    ignored = sorted(n for n in vocab if n not in keyed and n not in routed)
    out = [f"Key: `{key}`; one instance per value. Commands carrying it: "
           f"{join(code(n) for n in keyed) or 'none'}."]
    if routed:
        out.append(f"Answers without `{key}` ({join(code(n) for n in routed)}) reach the "
                   "instance whose request they answer, matched on the request's correlation "
                   "fields.")
    if ignored:
        out.append(f"Never reach this machine (no `{key}`, and not an answer to a request "
                   f"that has it): {join(code(n) for n in ignored)}.")
    return out

