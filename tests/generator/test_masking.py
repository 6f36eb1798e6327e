"""Masked bytes (``mask: <field>``) and frames whose header sizes their last field through
conditional fields (a probed frame length), as WebSocket frames are laid out: against the
frames of RFC 6455 section 5.7 packed by hand with ``struct``, in round trips through
``encode``/``decode`` and the ``StreamDecoder`` fed in pieces, with each kind of bad input and
bad spec, and through ``mypy --strict``."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate, load_frame_specs
from protoframe.generator.errors import SpecErrors
from protoframe.generator.layout_ops import MaskedBytes, kind_op
from protoframe.generator.layout_plan import plan_spec
from protoframe.generator.proto_model import load_protocol
from protoframe.runtime.codec import compiled
from protoframe.runtime.codec.masking import xor_mask
from protoframe.runtime.errors import (
    FrameTooLargeError,
    ReservedBitsError,
    TruncatedError,
    UnknownEnumValueError,
)
from tests.support.generate import assert_type_checks, generate_text, write_spec

SPEC = """\
protocol: wsm
doc: A WebSocket frame (RFC 6455 5.2) as the frame of a stream.
byte_order: big
enums:
  Opcode: {CONTINUATION: 0, TEXT: 1, BINARY: 2, CLOSE: 8, PING: 9, PONG: 10}
structs:
  Keyed:
    doc: A payload masked with a 4-byte key held as bytes.
    fields:
      - {name: key, type: bytes, length: 4}
      - {name: data, type: bytes, size: rest, mask: key}
frame:
  name: Frame
  fields:
    - name: b0
      type: u8
      bits:
        - {name: fin, type: bool}
        - {width: 3, reserved: true}
        - {name: opcode, width: 4, enum: Opcode}
    - name: b1
      type: u8
      bits:
        - {name: masked, type: bool, value: "has(masking_key)"}
        - {name: len7, width: 7,
           value: "len(payload) if len(payload) < 126 else 126 if len(payload) < 65536 else 127"}
    - {name: len16, type: u16, when: "len7 == 126", value: "len(payload)"}
    - {name: len64, type: u64, when: "len7 == 127", value: "len(payload)"}
    - {name: masking_key, type: u32, when: masked}
    - {name: length, type: u64,
       derive: "len16 if len7 == 126 else len64 if len7 == 127 else len7"}
    - {name: payload, type: bytes, size: length, mask: masking_key}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wsm")


@pytest.fixture(scope="module")
def ws(package: Path) -> ModuleType:
    return generate_text(package, "wsm", SPEC, "wsm_pkg")


def masked_by_hand(data: bytes, key: bytes) -> bytes:
    return bytes(b ^ key[i % 4] for i, b in enumerate(data))


def header(opcode: int, size: int, key: int | None, fin: bool = True) -> bytes:
    """RFC 6455 5.2's header packed by hand: the shortest length form."""
    b0 = (0x80 if fin else 0) | opcode
    mask = 0x80 if key is not None else 0
    if size < 126:
        head = struct.pack(">BB", b0, mask | size)
    elif size < 65536:
        head = struct.pack(">BBH", b0, mask | 126, size)
    else:
        head = struct.pack(">BBQ", b0, mask | 127, size)
    return head + (struct.pack(">I", key) if key is not None else b"")


@pytest.mark.parametrize(("opcode", "key", "payload", "wire"), [
    # RFC 6455 5.7, byte for byte: unmasked "Hello", masked "Hello", unmasked ping "Hello",
    # 256 bytes and 64 KiB of binary data in one unmasked frame.
    (1, None, b"Hello", bytes.fromhex("810548656c6c6f")),
    (1, 0x37FA213D, b"Hello", bytes.fromhex("818537fa213d7f9f4d5158")),
    (9, None, b"Hello", bytes.fromhex("890548656c6c6f")),
    (2, None, bytes(256), bytes.fromhex("827e0100") + bytes(256)),
    (2, None, bytes(65536), bytes.fromhex("827f0000000000010000") + bytes(65536)),
])
def test_the_rfc_6455_examples(ws: ModuleType, opcode: int, key: int | None, payload: bytes,
                               wire: bytes) -> None:
    value = ws.Frame(fin=True, opcode=ws.Opcode(opcode), masking_key=key, payload=payload)
    assert value.encode() == wire
    assert ws.Frame.decode(wire) == value
    assert ws.frame_length(wire, 0, len(wire), 1 << 20) == len(wire)
    assert "length" not in ws.Frame.__dataclass_fields__  # a size: computed, not stored


def test_masked_frames_against_bytes_packed_by_hand(ws: ModuleType) -> None:
    key = 0x01020304
    for size in (0, 1, 3, 125, 126, 1000, 65535, 65536, 70000):
        data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
        wire = header(2, size, key) + masked_by_hand(data, struct.pack(">I", key))
        value = ws.Frame(fin=True, opcode=ws.Opcode.BINARY, masking_key=key, payload=data)
        assert value.encode() == wire, size
        assert ws.Frame.decode(wire) == value


def test_xor_mask_is_the_bytewise_xor() -> None:
    key = bytes.fromhex("37fa213d")
    for size in (0, 1, 4, 5, 1023):
        data = bytes((7 * i + 3) % 256 for i in range(size))
        assert xor_mask(data, key) == masked_by_hand(data, key)
        assert xor_mask(xor_mask(data, key), key) == data
    assert xor_mask(b"\x00\x00\xff", b"\x0f\xf0") == b"\x0f\xf0\xf0"
    with pytest.raises(ValueError, match="a masking key of no bytes"):
        xor_mask(b"x", b"")


@settings(max_examples=150, deadline=None)
@given(size=st.sampled_from([0, 125, 126, 65535, 65536]) | st.integers(0, 400),
       key=st.none() | st.integers(0, 2**32 - 1), fin=st.booleans(),
       opcode=st.sampled_from([0, 1, 2, 8, 9, 10]), cut=st.integers(1, 40))
def test_round_trips_through_the_stream_decoder(ws: ModuleType, size: int, key: int | None,
                                                fin: bool, opcode: int, cut: int) -> None:
    values = [ws.Frame(fin=fin, opcode=ws.Opcode(opcode), masking_key=key,
                       payload=bytes([size % 251]) * size),
              ws.Frame(fin=True, opcode=ws.Opcode.PING, masking_key=key, payload=b"p")]
    wire = b"".join(v.encode() for v in values)
    assert wire.startswith(header(opcode, size, key, fin))
    decoder = ws.StreamDecoder()
    got = []
    for i in range(0, len(wire), cut):
        got += decoder.feed(wire[i : i + cut])
    assert got == values


def test_the_length_probe_waits_for_the_header(ws: ModuleType) -> None:
    wire = header(2, 70000, 0x11223344) + bytes(70000)
    for n in range(14):  # 2 + 8 + 4 header bytes
        assert ws.frame_length(wire, 0, n, 1 << 20) is None
    assert ws.frame_length(wire, 0, 14, 1 << 20) == 14 + 70000
    with pytest.raises(FrameTooLargeError, match="frame of 70014 bytes is over the 65536"):
        ws.frame_length(wire, 0, 14, 65536)


def test_bad_input_raises_its_own_error(ws: ModuleType) -> None:
    with pytest.raises(ReservedBitsError, match="Frame.b0: reserved bits 0x70 are set"):
        ws.StreamDecoder().feed(b"\xc1\x00")  # RSV1 without an extension
    with pytest.raises(UnknownEnumValueError, match="Frame.opcode: 3 is not a value of Opcode"):
        ws.StreamDecoder().feed(b"\x83\x00")  # a reserved non-control opcode
    with pytest.raises(TruncatedError):
        ws.Frame.decode(bytes.fromhex("818537fa213d7f9f"))  # 2 of 5 payload bytes


def test_a_key_of_bytes(ws: ModuleType) -> None:
    value = ws.Keyed(key=b"\x37\xfa\x21\x3d", data=b"Hello")
    assert value.encode() == bytes.fromhex("37fa213d7f9f4d5158")
    assert ws.Keyed.decode(value.encode()) == value


def test_masked_bytes_take_the_c_codec_when_their_struct_does(ws: ModuleType,
                                                             package: Path) -> None:
    """Keyed's masked bytes are compiled (tests/runtime/test_compiled_masked_bytes.py), and so
    is the frame, whose key a bit field guards (tests/runtime/test_compiled_bit_fields.py)."""
    root = write_spec(package / "plan", "wsm", SPEC)
    [spec] = load_frame_specs(root, "specs", load_protocol(root, "wsm", "specs"))
    plans = {p.name: p for p in plan_spec(spec)}
    assert isinstance(kind_op(plans["Frame"].op("payload")), MaskedBytes)
    assert plans["Frame"].op("payload").word == "masked_bytes"
    assert plans["Frame"].unknown_to_c == () and plans["Frame"].compiled
    assert compiled.is_compiled(ws.Frame) and compiled.is_compiled(ws.Keyed)
    wire = bytes.fromhex("818537fa213d7f9f4d5158")
    frame = ws.Frame.decode(wire)
    assert frame.encode() == wire
    with compiled.pure_python():
        assert ws.Frame.decode(wire) == frame and frame.encode() == wire


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "wsm", text), "specs", ["wsm"])
    return str(info.value.errors[0])


def _at(text: str, line_has: str, token: str) -> str:
    lines = text.splitlines()
    line_no = next(i for i, line in enumerate(lines) if line_has in line)
    return f"specs/wsm/wsm.yaml:{line_no + 1}:{lines[line_no].index(token) + 1}:"


@pytest.mark.parametrize(("old", "new", "message"), [
    ("{name: key, type: bytes, length: 4}", "{name: key, type: i32}",
     "mask: 'key' is not an unsigned integer (u8 ... u64) or bytes with a length:"),
    ("{name: key, type: bytes, length: 4}", "{name: key, type: u32, value: \"7\"}",
     "mask: 'key' is not stored (it is computed or derived)"),
    ("size: rest, mask: key}", "mask: key}",
     "mask: needs a size: (a field before it or rest)"),
    ("{name: data, type: bytes, size: rest, mask: key}",
     "{name: data, type: string, size: rest, mask: key}", "mask: needs a bytes field"),
])
def test_bad_masks_are_positioned_errors(tmp_path: Path, old: str, new: str,
                                         message: str) -> None:
    text = SPEC.replace(old, new)
    error = _error(tmp_path, text)
    assert message in error
    assert error.startswith(_at(text, "name: data", "key}")), error


@pytest.mark.slow
def test_the_generated_package_type_checks(ws: ModuleType, package: Path) -> None:
    assert_type_checks(package, "wsm_pkg")


def test_a_non_minimal_length_is_read_and_written_back_shortest(ws: ModuleType) -> None:
    # RFC 6455 5.2 asks the sender for the shortest length form; it does not ask a receiver
    # to refuse a longer one, so decoding takes it and encoding writes the shortest.
    wire = struct.pack(">BBH", 0x82, 126, 5) + b"Hello"
    value = ws.Frame.decode(wire)
    assert value.payload == b"Hello"
    assert value.encode() == bytes.fromhex("820548656c6c6f")
