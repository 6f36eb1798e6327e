"""The compiled and Python codecs compared on one call: the same value, or the same error.

The compiled codecs are a fast path; every outcome (a value, or an exception's type and text)
must be the one the generated Python code gives. The agreement tests of each compiled op run
their cases through :func:`same`.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from protoframe.runtime.codec import compiled


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """``("value", repr(result))`` or ``("raised", (type, text))`` of calling ``fn``."""
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - the exception is the thing compared
        return "raised", (type(exc), str(exc))
    return "value", repr(value)


def same(fn: Callable[[], Any]) -> tuple[str, Any]:
    """``fn``'s outcome, the same with the compiled codecs as with the Python ones."""
    fast = outcome(fn)
    with compiled.pure_python():
        python = outcome(fn)
    assert fast == python
    return fast


def same_decodes(cls: Any, data: bytes) -> str:
    """Whether ``data`` decodes ("value") or not ("raised") as ``cls``, through ``decode`` and
    ``decode_from``, each the same with both codecs."""
    kind = same(lambda: cls.decode(data))[0]
    same(lambda: cls.decode_from(data, 0, len(data)))
    return kind


Decodes = Callable[[Any, bytes], str]


def check_truncations(samples: Iterable[tuple[Any, bytes]], decodes: Decodes = same_decodes,
                      trailers: tuple[bytes, ...] = (b"\x00",)) -> None:
    """Every cut of each sample's wire form, and the whole with each trailer after it, decodes
    (or fails) alike with both codecs."""
    for cls, wire in samples:
        for cut in range(len(wire)):
            decodes(cls, wire[:cut])
        for trailer in trailers:
            decodes(cls, wire + trailer)


def check_random_damage(samples: Iterable[tuple[Any, bytes]], seed: int, rounds: int,
                        decodes: Decodes = same_decodes) -> None:
    """``rounds`` copies of each sample with 1 to 3 bytes overwritten decode (or fail) alike
    with both codecs; both outcomes must occur, so the damage reaches the checks."""
    rng = random.Random(seed)
    outcomes = {"value": 0, "raised": 0}
    for cls, wire in samples:
        for _ in range(rounds):
            bad = bytearray(wire)
            for _ in range(rng.randint(1, 3)):
                bad[rng.randrange(len(bad))] = rng.randrange(256)
            outcomes[decodes(cls, bytes(bad))] += 1
    assert min(outcomes.values()) > 0, outcomes


def python_calls(module: ModuleType, fn: Callable[[], Any]) -> list[str]:
    """The functions of ``module`` (its generated Python methods) that ``fn`` runs: none for
    a value the compiled codec codes on its own."""
    calls: list[str] = []
    path = module.__file__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename == path:
            calls.append(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def check_stays_in_c(samples: Iterable[tuple[Any, bytes]]) -> None:
    """Each sample decodes, and its value encodes, without running any generated Python method
    of its class's module (the compiled codec gave up on none of them)."""
    for cls, wire in samples:
        module = sys.modules[cls.__module__]
        value = cls.decode(wire)
        calls = python_calls(module, lambda: cls.decode(wire))  # noqa: B023
        calls += python_calls(module, value.encode)
        assert calls == [], (cls, calls)


def check_emptied_slots(samples: Iterable[tuple[Any, bytes]]) -> None:
    """Each sample's value with one slot emptied, for each of its slots, encodes (or fails)
    alike with both codecs."""
    for cls, wire in samples:
        for name in type(cls.decode(wire)).__slots__:
            broken = cls.decode(wire)
            delattr(broken, name)
            same(broken.encode)


def bare_codec(*rows: tuple[Any, ...]) -> object:
    """A frame codec built straight from ``rows`` for a one-slot class (``key``), for the tests
    of the tables the C codec refuses; it raises as the extension does."""
    from dataclasses import make_dataclass

    from protoframe.runtime.codec import _framecodec

    cls = make_dataclass("Odd", [("key", object)], slots=True)
    return _framecodec.FrameCodec(cls, rows, True, lambda value: b"",
                                  lambda cls, data: None, lambda cls, buf, pos, end: None)


def check_no_leaks(samples: Iterable[tuple[Any, bytes]], rounds: int = 200) -> None:
    """Decoding each sample, encoding its value and decoding it cut short (the give-up path)
    ``rounds`` times leaves the wire's reference count and the allocated blocks as they were."""
    import gc

    values = [(cls, wire, cls.decode(wire)) for cls, wire in samples]

    def run(n: int) -> None:
        for _ in range(n):
            for cls, wire, value in values:
                value.encode()
                cls.decode(wire)
                try:
                    cls.decode(wire[:-1])
                except Exception:  # noqa: BLE001, S110 - the give-up path is what runs
                    pass

    run(20)
    gc.collect()
    counts = [sys.getrefcount(wire) for _, wire, _ in values]
    before = sys.getallocatedblocks()
    run(rounds)
    gc.collect()
    assert [sys.getrefcount(wire) for _, wire, _ in values] == counts
    assert sys.getallocatedblocks() - before < 300
