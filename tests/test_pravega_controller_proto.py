"""Our specs/pravega/controller.proto against upstream's Controller.proto, field by field.

Both files are compiled with protoc (grpcio-tools) and compared as descriptors: the package,
every message we declare (fields: name, number, type, label, message/enum type; nested enums
and their values) and every RPC we declare (request and response types) must be upstream's.
The documented differences are checked to be exactly these: enum-typed fields marked
``optional``, and ``SegmentLocation`` declared at top level rather than inside
``SegmentsAtTime``. A round trip through the official protobuf runtime shows that the bytes
are the same regardless.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor_pb2 import DescriptorProto, FieldDescriptorProto
from google.protobuf.descriptor_pb2 import FileDescriptorProto as FileProto

from clients.pravega.controller import RPCS, SERVICE
from generated.pravega import controller as pb
from generator.protoc import compile_protos

ROOT = Path(__file__).resolve().parent.parent
OURS = ROOT / "specs" / "pravega"
UPSTREAM = ROOT.parent / "shared" / "reference" / "pravega"
PACKAGE = "io.pravega.controller.stream.api.grpc.v1"

pytestmark = pytest.mark.skipif(
    not (UPSTREAM / "Controller.proto").is_file(),
    reason="../shared/reference/pravega/Controller.proto is not present; the upstream "
           "comparison needs the shared reference data")

# Our name -> upstream's, where they differ (see the note in controller.proto).
RENAMED = {"SegmentLocation": "SegmentsAtTime.SegmentLocation"}
# Fields that are `optional` in ours only (message, field).
OPTIONAL_ENUMS = {
    ("CreateScopeStatus", "status"), ("DeleteScopeStatus", "status"),
    ("StreamInfo", "accessOperation"), ("StreamsInScopeResponse", "status"),
    ("ScalingPolicy", "scaleType"), ("RetentionPolicy", "retentionType"),
    ("CreateStreamStatus", "status"), ("UpdateStreamStatus", "status"),
    ("DeleteStreamStatus", "status"), ("RemoveWriterResponse", "result"),
    ("TimestampResponse", "result"), ("CreateReaderGroupResponse", "status"),
    ("ReaderGroupConfigResponse", "status"), ("DeleteReaderGroupStatus", "status"),
    ("UpdateReaderGroupResponse", "status"),
}


def _file(directory: Path, name: str) -> FileProto:
    (descriptor,) = [f for f in compile_protos(directory, [name], str(directory))
                     if f.name == name]
    return descriptor


def _messages(file: FileProto) -> dict[str, DescriptorProto]:
    out: dict[str, DescriptorProto] = {}

    def walk(prefix: str, messages: list[DescriptorProto]) -> None:
        for message in messages:
            name = f"{prefix}{message.name}"
            if not message.options.map_entry:
                out[name] = message
            walk(f"{name}.", list(message.nested_type))

    walk("", list(file.message_type))
    return out


def _upstream_type(type_name: str) -> str:
    short = type_name.removeprefix(f".{PACKAGE}.")
    return f".{PACKAGE}.{RENAMED.get(short, short)}" if type_name else ""


def _field_shape(field: FieldDescriptorProto, renamed: bool) -> tuple[object, ...]:
    type_name = _upstream_type(field.type_name) if renamed else field.type_name
    return (field.name, field.number, field.type, field.label, type_name)


@pytest.fixture(scope="module")
def files() -> tuple[FileProto, FileProto]:
    return _file(OURS, "controller.proto"), _file(UPSTREAM, "Controller.proto")


def test_package_and_syntax(files: tuple[FileProto, FileProto]) -> None:
    ours, theirs = files
    assert (ours.package, ours.syntax) == (theirs.package, theirs.syntax) == (PACKAGE, "proto3")
    assert SERVICE == f"{PACKAGE}.{theirs.service[0].name}"


def test_every_message_matches_upstream_field_by_field(
        files: tuple[FileProto, FileProto]) -> None:
    ours, theirs = _messages(files[0]), _messages(files[1])
    assert len(ours) >= 40
    for name, message in ours.items():
        upstream = theirs[RENAMED.get(name, name)]
        assert [_field_shape(f, True) for f in message.field] == \
            [_field_shape(f, False) for f in upstream.field], name
        assert [(e.name, [(v.name, v.number) for v in e.value]) for e in message.enum_type] == \
            [(e.name, [(v.name, v.number) for v in e.value]) for e in upstream.enum_type], name
        for field in message.field:
            optional_here = field.proto3_optional
            assert optional_here == ((name, field.name) in OPTIONAL_ENUMS), (name, field.name)
            if optional_here:
                assert field.type == FieldDescriptorProto.TYPE_ENUM
        # Only the synthetic oneofs of those `optional`s; upstream declares none here.
        assert len(message.oneof_decl) == sum(f.proto3_optional for f in message.field)
        assert not upstream.oneof_decl
    assert OPTIONAL_ENUMS <= {(m, f.name) for m, d in ours.items() for f in d.field}


def test_every_rpc_matches_upstream(files: tuple[FileProto, FileProto]) -> None:
    (ours,), (theirs,) = files[0].service, files[1].service
    assert ours.name == theirs.name == "ControllerService"
    upstream = {m.name: m for m in theirs.method}
    assert {m.name for m in ours.method} == set(RPCS)
    for method in ours.method:
        other = upstream[method.name]
        assert (_upstream_type(method.input_type), _upstream_type(method.output_type)) == \
            (other.input_type, other.output_type), method.name
        assert RPCS[method.name].FULL_NAME == method.input_type.removeprefix(".")


def test_our_bytes_parse_with_upstream_schema(files: tuple[FileProto, FileProto]) -> None:
    """The official runtime, given upstream's schema, reads what our classes write (and back)."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(files[1])

    def upstream(name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))

    ranges = pb.SegmentRanges(segmentRanges=[pb.SegmentRange(
        segmentId=pb.SegmentId(streamInfo=pb.StreamInfo(scope="sc", stream="st"),
                               segmentId=(1 << 32) | 3), minKey=0.25, maxKey=0.5)],
        delegationToken="t")
    parsed = upstream("SegmentRanges").FromString(ranges.encode())
    assert parsed.segmentRanges[0].segmentId.segmentId == (1 << 32) | 3
    assert parsed.segmentRanges[0].maxKey == 0.5 and parsed.delegationToken == "t"

    at_time = pb.SegmentsAtTime(segments=[pb.SegmentLocation(
        segmentId=pb.SegmentId(segmentId=2), offset=77)])
    parsed = upstream("SegmentsAtTime").FromString(at_time.encode())
    assert (parsed.segments[0].segmentId.segmentId, parsed.segments[0].offset) == (2, 77)

    # An `optional` enum set to its zero value is written; upstream reads the same value.
    status = pb.CreateScopeStatus(status=pb.CreateScopeStatus.Status.SUCCESS)
    assert upstream("CreateScopeStatus").FromString(status.encode()).status == 0
    exists = upstream("CreateScopeStatus")(status=2).SerializeToString()
    assert pb.CreateScopeStatus.decode(exists).status == pb.CreateScopeStatus.Status.SCOPE_EXISTS
    config = upstream("StreamConfig")()
    config.streamInfo.scope = "sc"
    config.scalingPolicy.minNumSegments = 3
    config.scalingPolicy.scaleType = 1
    decoded = pb.StreamConfig.decode(config.SerializeToString())
    assert decoded.scalingPolicy is not None and decoded.scalingPolicy.minNumSegments == 3
    assert decoded.scalingPolicy.scaleType == \
        pb.ScalingPolicy.ScalingPolicyType.BY_RATE_IN_KBYTES_PER_SEC
