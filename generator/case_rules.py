"""The cases of a switch: ``cases:`` (a value each, its layout one struct or one per
direction) and ``names:`` (the command each case is, one name or one per direction).

Read by ``StructBuilder.field`` for a ``switch`` field (``cases``); each mistake is reported at
the case or name that makes it, and a case that does not resolve leaves its default command
names in ``unresolved`` so what names them is not reported again.
"""

from __future__ import annotations

import re
from typing import Any

from protoframe.generator.build_context import BuildContext, PathT
from protoframe.generator.frame_ir import Case
from protoframe.generator.literals import LiteralError, is_char_literal
from protoframe.generator.spec_yaml import LocDict
from protoframe.generator.switch_rules import case_value, key_enum


class CaseRules(BuildContext):
    def cases(self, raw: LocDict, names: LocDict, path: PathT) -> list[Case]:
        """The cases of a switch at ``path`` (its ``cases:`` and ``names:``)."""
        out: list[Case] = []
        seen_values: dict[int, str] = {}
        seen_names: set[str] = set()
        layout_of: dict[str, object] = {}  # struct name -> the case key whose layout it is
        given = self.case_names(names, [*path, "names"], path)
        for key, target in raw.items():
            cpath = [*path, "cases", key]
            try:
                value = case_value(self, key, path)
            except LiteralError as exc:
                enum = key_enum(self, path)
                self.error(f"switch case: {exc}" if is_char_literal(str(key)) else
                           f"switch case {key!r} is not an integer"
                           + (f" nor a value of {enum.name}" if enum else ""), cpath, key=True)
                self.unresolved.update(_case_default_names(target))  # one mistake, one error
                continue
            if value in seen_values:
                self.error(f"dispatch value {value} is duplicated (also {seen_values[value]})",
                           cpath, key=True)
                self.unresolved.update(_case_default_names(target))
                continue
            if isinstance(target, str):
                to_server = to_client = self.lookup_struct(target, cpath)
                default_name = target
            else:
                to_server = self.lookup_struct(target["to_server"], [*cpath, "to_server"]) \
                    if "to_server" in target else None
                to_client = self.lookup_struct(target["to_client"], [*cpath, "to_client"]) \
                    if "to_client" in target else None
                default_name = (target.get("to_server") or target.get("to_client"))
            self._one_case_per_layout(key, target, cpath, layout_of)
            name, client_name = self.case_command_names(value, target, given, default_name)
            for n in (name, client_name):
                if n is None:
                    continue
                if n in seen_names:
                    # At the name where the spec gives it, else at the case it comes from.
                    named = given.get(value)
                    self.error(f"command name {n!r} is used twice",
                               named[1] if named else cpath, key=named is None)
                seen_names.add(n)
            seen_values[value] = name
            out.append(Case(value, name, to_server, to_client, client_name,
                            str(key) if is_char_literal(str(key)) else ""))
        for value, (_, npath) in given.items():
            if value not in seen_values:
                self.error(f"names: no case has the value {value}", npath, key=True)
        return out

    def case_names(self, names: LocDict, path: PathT,
                   switch_path: PathT) -> dict[int, tuple[Any, PathT]]:
        """``names:`` by case value (keys are written like the cases' own)."""
        out: dict[int, tuple[Any, PathT]] = {}
        for key, name in names.items():
            npath = [*path, key]
            try:
                value = case_value(self, key, switch_path)
            except LiteralError as exc:
                self.error(f"names: {exc}", npath, key=True)
                continue
            if value in out:
                self.error(f"names: value {value} is named twice", npath, key=True)
                continue
            out[value] = (name, npath)
        return out

    def _one_case_per_layout(self, key: object, target: Any, cpath: PathT,
                             layout_of: dict[str, object]) -> None:
        """A struct is the layout of one case of a switch only: a frame's case (its command,
        the value its encoder writes) is found from its body's class, so a second case of the
        same struct could never be told from the first."""
        layouts = [(target, cpath)] if isinstance(target, str) else [
            (target[d], [*cpath, d]) for d in ("to_server", "to_client")
            if isinstance(target.get(d), str)]
        for i, (struct, where) in enumerate(layouts):
            if any(struct == s for s, _ in layouts[:i]):
                continue  # {to_server: A, to_client: A}: one layout both ways
            if struct in layout_of:
                self.error(f"struct {struct!r} is already the layout of case "
                           f"{layout_of[struct]}: a frame's case is known by its body's class, "
                           "so each case needs a struct of its own (declare one with the same "
                           "fields)", where)
            else:
                layout_of[struct] = key

    def case_command_names(self, value: int, target: Any,
                           given: dict[int, tuple[Any, PathT]],
                           default_name: str) -> tuple[str, str | None]:
        """A case's command name, and the to-client layout's own one when each direction is
        named (``names: {v: {to_server: A, to_client: B}}``)."""
        name, npath = given.get(value, (None, []))
        if not isinstance(name, dict):
            return name or _upper_snake(default_name), None
        layouts = target if isinstance(target, dict) else {}
        if not ("to_server" in layouts and "to_client" in layouts) or \
                layouts["to_server"] == layouts["to_client"]:
            # The command of a decoded frame is found by its body's class: one class, one name.
            self.error(f"names: a name per direction needs case {value} to have a different "
                       "layout each way ({to_server: A, to_client: B})", npath)
            return name.get("to_server") or name.get("to_client") or \
                _upper_snake(default_name), None
        return (name.get("to_server") or _upper_snake(layouts["to_server"]),
                name.get("to_client") or _upper_snake(layouts["to_client"]))


def _case_default_names(target: Any) -> list[str]:
    """The commands a case that was rejected would have defined without ``names:``, which
    the interactions and machines naming them then do not report again."""
    if isinstance(target, str):
        return [_upper_snake(target)]
    if isinstance(target, dict):
        return [_upper_snake(v) for k, v in target.items()
                if k in ("to_server", "to_client") and isinstance(v, str)]
    return []


def _upper_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()
