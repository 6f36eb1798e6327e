"""Params passed into switch cases: ``args:`` on a switch gives every case struct that declares
params the values of its own params.

The module-level case tables map a code to a ``decode_from`` that takes the bytes alone, so a
case that takes params is decoded by a test of the key ahead of the table, and encoded by a
test of the body's class ahead of the plain ``encode_to``. What both codec emitters write for
such a switch is here; validation (``StructBuilder.check_uses``) made sure every param of
every case gets an arg, every arg is some case's param, and no such case depends on the
direction.
"""

from __future__ import annotations

from collections.abc import Callable

from protoframe.generator.frame_emit import call_args, indent
from protoframe.generator.frame_ir import StructDef, SwitchField


def case_structs(f: SwitchField) -> list[StructDef]:
    """The distinct structs of a switch's cases, in case order."""
    out: list[StructDef] = []
    for c in f.cases:
        for s in c.structs:
            if all(s is not o for o in out):
                out.append(s)
    return out


def taking(f: SwitchField) -> list[tuple[int, StructDef]]:
    """The cases whose struct takes params, as (code, struct): the first code of each."""
    out: list[tuple[int, StructDef]] = []
    for c in f.cases:
        s = c.to_server or c.to_client
        if s is not None and s.params and all(s is not o for _, o in out):
            out.append((c.value, s))
    return out


def case_call_args(f: SwitchField, held: StructDef, s: StructDef,
                   resolve: Callable[[str], str]) -> str:
    """The arguments switch ``f`` of ``s`` passes to case struct ``held``: its own params'."""
    return call_args({p.name: f.args[p.name] for p in held.params}, s, resolve, f)


def every_case_takes(f: SwitchField) -> bool:
    """Whether every case struct of the switch takes params (no case table is needed)."""
    return len(taking(f)) == len(case_structs(f))


def decode_lines(f: SwitchField, key: str, target: str, vend: str,
                 args: Callable[[StructDef], str], table: list[str],
                 unknown: list[str]) -> list[str]:
    """Decode the body: each case taking params called with its args when ``key`` holds its
    code (every code of it), ``table`` (the lookup and call of the others) otherwise; when no
    other case is left, ``unknown`` (the raise for a code no case has)."""
    # Annotated first, so that the type checker takes every branch's type.
    lines: list[str] = [f"{target}: {f.alias}"]
    for s in [s for _, s in taking(f)]:
        codes = [c.value for c in f.cases if (c.to_server or c.to_client) is s]
        test = f"{key} == {codes[0]}" if len(codes) == 1 else \
            f"{key} in ({', '.join(map(str, codes))})"
        lines += [f"{'elif' if len(lines) > 1 else 'if'} {test}:",
                  f"    {target}, pos = {s.name}.decode_from(buf, pos, {vend}{args(s)})"]
    return [*lines, "else:", *indent(unknown if every_case_takes(f) else table)]


def encode_lines(f: SwitchField, value: str, call: Callable[[str], list[str]],
                 args: Callable[[StructDef], str]) -> list[str]:
    """Encode the body with ``call(args)``: each class taking params with its args, the
    others with none; when every class takes params the last one is what is left."""
    with_params = [s for _, s in taking(f)]
    every = every_case_takes(f)
    lines: list[str] = []
    for i, s in enumerate(with_params):
        if every and i == len(with_params) - 1 and i > 0:
            lines += ["else:", *indent(call(args(s)))]
        elif every and len(with_params) == 1:
            lines += call(args(s))
        else:
            lines += [f"{'elif' if i else 'if'} isinstance({value}, {s.name}):",
                      *indent(call(args(s)))]
    if not every:
        lines += ["else:", *indent(call(""))]
    return lines
