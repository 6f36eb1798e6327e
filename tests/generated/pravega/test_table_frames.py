"""Pravega's table-segment commands (codes 68-88) generated from specs/pravega/pravega.yaml.

Expected bytes are written out by hand from the upstream field order (the Java command classes
and the Rust client's commands): a table key is an i32 payload length (4 + data + 8), the
i32 data length, the data and an i64 version; a value is an i32 payload length (4 + data),
the i32 data length and the data. Segment "t" is ``0001 74``, an empty token ``0000``.
"""

from __future__ import annotations

from typing import Any

import pytest

from protoframe.generated.pravega.frames import (
    CreateTableSegment,
    DeleteTableSegment,
    Frame,
    GetTableSegmentInfo,
    ReadTable,
    ReadTableEntries,
    ReadTableEntriesDelta,
    ReadTableKeys,
    RemoveTableKeys,
    TableEntriesDeltaRead,
    TableEntriesRead,
    TableEntriesUpdated,
    TableEntry,
    TableKey,
    TableKeyBadVersion,
    TableKeyDoesNotExist,
    TableKeysRead,
    TableKeysRemoved,
    TableRead,
    TableSegmentInfo,
    TableSegmentNotEmpty,
    TableValue,
    UpdateTableEntries,
)
from protoframe.generated.pravega.machines import command_of
from protoframe.runtime.errors import DecodeError, EncodeError


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


NO_VERSION = -(1 << 63)
KEY_K = "0000000d 00000001 6b"  # key "k" before its version
VALUE_V = "00000005 00000001 76"

VECTORS: list[tuple[str, bytes, Any]] = [
    ("CREATE_TABLE_SEGMENT",
     h("00000046 0000001a 0000000000000001 0001 74 0000 00 00000000 0000000000000000"),
     CreateTableSegment(request_id=1, segment="t", delegation_token="",
                        sorted_deprecated=False, key_length=0, rollover_size_bytes=0)),
    ("DELETE_TABLE_SEGMENT", h("00000047 0000000e 0000000000000002 0001 74 01 0000"),
     DeleteTableSegment(request_id=2, segment="t", must_be_empty=True, delegation_token="")),
    ("GET_TABLE_SEGMENT_INFO", h("00000044 0000000d 0000000000000003 0001 74 0000"),
     GetTableSegmentInfo(request_id=3, segment="t", delegation_token="")),
    ("TABLE_SEGMENT_INFO",
     h("00000045 00000027 0000000000000003 0001 74 0000000000000000 0000000000000040"
       " 0000000000000002 00000000"),
     TableSegmentInfo(request_id=3, segment="t", start_offset=0, length=0x40, entry_count=2,
                      key_length=0)),
    ("UPDATE_TABLE_ENTRIES",
     h("0000004a 00000033 0000000000000004 0001 74 0000 00000001 " + KEY_K
       + " 8000000000000000 " + VALUE_V + " ffffffffffffffff"),
     UpdateTableEntries(request_id=4, segment="t", delegation_token="",
                        entries=[TableEntry(key=TableKey(data=b"k", key_version=NO_VERSION),
                                            value=TableValue(data=b"v"))],
                        table_segment_offset=-1)),
    ("TABLE_ENTRIES_UPDATED",
     h("0000004b 0000001c 0000000000000004 00000002 0000000000000000 0000000000000025"),
     TableEntriesUpdated(request_id=4, updated_versions=[0, 0x25])),
    ("REMOVE_TABLE_KEYS",
     h("0000004c 0000002a 0000000000000005 0001 74 0000 00000001 " + KEY_K
       + " 0000000000000007 ffffffffffffffff"),
     RemoveTableKeys(request_id=5, segment="t", delegation_token="",
                     keys=[TableKey(data=b"k", key_version=7)], table_segment_offset=-1)),
    ("TABLE_KEYS_REMOVED", h("0000004d 0000000b 0000000000000005 0001 74"),
     TableKeysRemoved(request_id=5, segment="t")),
    ("READ_TABLE",
     h("0000004e 00000022 0000000000000006 0001 74 0000 00000001 " + KEY_K
       + " 8000000000000000"),
     ReadTable(request_id=6, segment="t", delegation_token="",
               keys=[TableKey(data=b"k", key_version=NO_VERSION)])),
    ("TABLE_READ",  # a missing key: version -1 and an empty value
     h("0000004f 00000028 0000000000000006 0001 74 00000001 " + KEY_K
       + " ffffffffffffffff 00000004 00000000"),
     TableRead(request_id=6, segment="t",
               entries=[TableEntry(key=TableKey(data=b"k", key_version=-1),
                                   value=TableValue(data=b""))])),
    ("TABLE_SEGMENT_NOT_EMPTY", h("00000050 0000000d 0000000000000002 0001 74 0000"),
     TableSegmentNotEmpty(request_id=2, segment="t", server_stack_trace="")),
    ("TABLE_KEY_DOES_NOT_EXIST", h("00000051 0000000d 0000000000000004 0001 74 0000"),
     TableKeyDoesNotExist(request_id=4, segment="t", server_stack_trace="")),
    ("TABLE_KEY_BAD_VERSION", h("00000052 0000000d 0000000000000004 0001 74 0000"),
     TableKeyBadVersion(request_id=4, segment="t", server_stack_trace="")),
    ("READ_TABLE_KEYS",  # as a Java peer sends it: every iterator argument, all empty
     h("00000053 00000021 0000000000000007 0001 74 0000 0000000a"
       " 00000000 00000000 00000000 00000000"),
     ReadTableKeys(request_id=7, segment="t", delegation_token="", suggested_key_count=10,
                   continuation_token=b"", prefix_filter=b"", from_key=b"", to_key=b"")),
    ("TABLE_KEYS_READ",
     h("00000054 00000026 0000000000000007 0001 74 00000001 " + KEY_K
       + " 0000000000000003 00000002 016b"),
     TableKeysRead(request_id=7, segment="t", keys=[TableKey(data=b"k", key_version=3)],
                   continuation_token=b"\x01k")),
    ("READ_TABLE_ENTRIES",
     h("00000055 00000021 0000000000000008 0001 74 0000 00000064"
       " 00000000 00000000 00000000 00000000"),
     ReadTableEntries(request_id=8, segment="t", delegation_token="",
                      suggested_entry_count=100, continuation_token=b"", prefix_filter=b"",
                      from_key=b"", to_key=b"")),
    ("TABLE_ENTRIES_READ",
     h("00000056 0000002f 0000000000000008 0001 74 00000001 " + KEY_K
       + " 0000000000000003 " + VALUE_V + " 00000002 016b"),
     TableEntriesRead(request_id=8, segment="t",
                      entries=[TableEntry(key=TableKey(data=b"k", key_version=3),
                                          value=TableValue(data=b"v"))],
                      continuation_token=b"\x01k")),
    ("READ_TABLE_ENTRIES_DELTA",
     h("00000058 00000019 0000000000000009 0001 74 0000 0000000000000010 00000020"),
     ReadTableEntriesDelta(request_id=9, segment="t", delegation_token="", from_position=0x10,
                           suggested_entry_count=0x20)),
    ("TABLE_ENTRIES_DELTA_READ",
     h("00000057 00000019 0000000000000009 0001 74 00000000 00 01 0000000000000030"),
     TableEntriesDeltaRead(request_id=9, segment="t", entries=[], should_clear=False,
                           reached_end=True, last_position=0x30)),
]
IDS = [name for name, _, _ in VECTORS]


@pytest.mark.parametrize(("name", "wire", "body"), VECTORS, ids=IDS)
def test_encode_matches_the_hand_written_bytes(name: str, wire: bytes, body: Any) -> None:
    assert Frame(body=body).encode() == wire


@pytest.mark.parametrize(("name", "wire", "body"), VECTORS, ids=IDS)
def test_decode_gives_the_values_back_under_the_command_name(name: str, wire: bytes,
                                                             body: Any) -> None:
    frame = Frame.decode(wire)
    assert frame.body == body
    assert command_of(frame) == (name, body)


def test_every_table_code_is_modelled() -> None:
    """No table-segment command is left as raw payload bytes."""
    assert sorted(int.from_bytes(w[:4], "big") for _, w, _ in VECTORS) == \
        [*range(68, 72), *range(74, 89)]


def test_create_table_segment_as_the_rust_client_sends_it() -> None:
    """The Rust client stops after the token; the Java defaults fill the rest."""
    body = Frame.decode(h("00000046 0000000d 0000000000000001 0001 74 0000")).body
    assert body == CreateTableSegment(request_id=1, segment="t", delegation_token="",
                                      sorted_deprecated=False, key_length=0,
                                      rollover_size_bytes=0)


def test_create_table_segment_with_a_fixed_key_length() -> None:
    wire = h("00000046 0000001a 0000000000000001 0001 74 0000 00 00000010 0000000000000400")
    assert Frame.decode(wire).body == CreateTableSegment(
        request_id=1, segment="t", delegation_token="", sorted_deprecated=False, key_length=16,
        rollover_size_bytes=1024)


def test_read_table_keys_as_the_rust_client_sends_it() -> None:
    """The Rust client sends the continuation token and no key bounds."""
    body = Frame.decode(h("00000053 00000017 0000000000000007 0001 74 0000 0000000a"
                          " 00000002 016b")).body
    assert body == ReadTableKeys(request_id=7, segment="t", delegation_token="",
                                 suggested_key_count=10, continuation_token=b"\x01k")
    assert (body.prefix_filter, body.from_key, body.to_key) == (None, None, None)


def test_updates_without_a_table_segment_offset_read_it_as_minus_one() -> None:
    wire = h("0000004c 00000022 0000000000000005 0001 74 0000 00000001 " + KEY_K
             + " 0000000000000007")
    assert Frame.decode(wire).body == RemoveTableKeys(
        request_id=5, segment="t", delegation_token="",
        keys=[TableKey(data=b"k", key_version=7)], table_segment_offset=-1)


def test_an_empty_key_has_no_version_on_the_wire() -> None:
    """The Java peers write (and read) an empty key as its two lengths only."""
    assert TableKey(data=b"", key_version=None).encode() == h("0000000c 00000000")
    wire = h("0000004e 0000002a 0000000000000006 0001 74 0000 00000002 0000000c 00000000 "
             + KEY_K + " 0000000000000001")
    assert Frame.decode(wire).body == ReadTable(
        request_id=6, segment="t", delegation_token="",
        keys=[TableKey(data=b"", key_version=None), TableKey(data=b"k", key_version=1)])
    with pytest.raises(EncodeError):
        TableKey(data=b"", key_version=5).encode()
    with pytest.raises(EncodeError):
        TableKey(data=b"k", key_version=None).encode()


def test_a_value_payload_length_bounds_the_value() -> None:
    """A value's payload length is the size of what follows it, and must agree."""
    assert TableValue.decode(h("00000006 00000002 6869")) == TableValue(data=b"hi")
    with pytest.raises(DecodeError):
        TableValue.decode(h("00000009 00000002 6869"))


def test_a_key_payload_length_is_not_trusted_on_decode() -> None:
    """The Java peers use a key's payload length only as a bound; the data length decides."""
    wire = h("0000004e 00000022 0000000000000006 0001 74 0000 00000001 00000063 00000001 6b"
             " 8000000000000000")
    assert Frame.decode(wire).body == ReadTable(
        request_id=6, segment="t", delegation_token="",
        keys=[TableKey(data=b"k", key_version=NO_VERSION)])
