"""What ``first:`` adds to ``client.py``: a request whose request or answer is a first message
is a method like any other (``client_view``), and a server's first message that answers no
request (a server-first protocol: MySQL's greeting) is awaited with a method of its own, named
after its command (``GREETING`` -> ``await requests.greeting()``), which returns it whether it
arrived before the call or after.
"""

from __future__ import annotations

from protoframe.generator.codewriter import Imports, docstring, q
from protoframe.generator.spec_ir import FrameSpec

_EMPTY = ("first_init", "first_handle", "first_lost", "first_method")


def awaited_name(spec: FrameSpec) -> str | None:
    """The command of the server's first message when it answers no request, else None."""
    answers = {n for r in spec.requests for n in (*r.responses, *r.errors, *r.until)}
    return next((name for name, info in spec.commands.items()
                 if info.first == "to_client" and name not in answers), None)


def awaited_first(spec: FrameSpec, imports: Imports) -> dict[str, list[str]]:
    """The client's lines waiting for the server's first message (all empty without one)."""
    name = awaited_name(spec)
    if name is None:
        return {key: [] for key in _EMPTY}
    struct = f"frames.{spec.commands[name].body_type}"
    method = name.lower()
    imports.use("asyncio")
    doc = docstring(
        f"The server's first message ({name}), once it has arrived.\n\nIt needs no request: "
        "the server sends it as the connection opens, and it is kept until asked for. Raises "
        "what ended the connection if it ended first, and ``TimeoutError`` after "
        "``timeout`` seconds (the requests' timeout when None).", "        ")
    return {
        "first_init": [
            "        # The server's first message, or what ended the connection before it.",
            f"        self._{method}: {struct} | BaseException | None = None",
            f"        self._{method}_arrived = asyncio.Event()"],
        "first_handle": [
            f"        if isinstance(frame, {struct}):",
            f"            self._{method} = frame",
            f"            self._{method}_arrived.set()",
            "            return True"],
        "first_lost": [
            f"        if self._{method} is None:",
            f"            self._{method} = exc",
            f"            self._{method}_arrived.set()"],
        "first_method": [
            "",
            f"    async def {method}(self, *, timeout: float | None = None) -> {struct}:",
            "        " + doc,
            "        await asyncio.wait_for(",
            f"            self._{method}_arrived.wait(), "
            "self.timeout if timeout is None else timeout",
            "        )",
            f"        found = self._{method}",
            "        if isinstance(found, BaseException):",
            "            raise found",
            f"        assert found is not None, {q('set with the event')}",
            "        return found"],
    }
