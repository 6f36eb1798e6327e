"""Our specs/pravega/controller.proto against upstream's Controller.proto, field by field.

Both files are compiled with protoc (grpcio-tools) and compared as descriptors: the package,
every message we declare (fields: name, number, type, label, message/enum type, proto3
``optional``; nested enums and their values; nested messages) and every RPC we declare
(request and response types) must be upstream's. The one difference is the selection: messages
and RPCs our controller does not use (transactions, key-value tables, subscribers and others)
are left out. A round trip through the official protobuf runtime shows that the
bytes are the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor_pb2 import DescriptorProto, FieldDescriptorProto
from google.protobuf.descriptor_pb2 import FileDescriptorProto as FileProto

from protoframe.clients.pravega.controller import RPCS, SERVICE
from protoframe.generated.pravega import controller as pb
from protoframe.generator.protoc import compile_protos
from tests.support.paths import ROOT

OURS = ROOT / "specs" / "pravega"
UPSTREAM = ROOT.parent / "shared" / "reference" / "pravega"
PACKAGE = "io.pravega.controller.stream.api.grpc.v1"

pytestmark = pytest.mark.skipif(
    not (UPSTREAM / "Controller.proto").is_file(),
    reason="../shared/reference/pravega/Controller.proto is not present; the upstream "
           "comparison needs the shared reference data")

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


def _field_shape(field: FieldDescriptorProto) -> tuple[object, ...]:
    return (field.name, field.number, field.type, field.label, field.type_name,
            field.proto3_optional)


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
    enum_fields = 0
    for name, message in ours.items():
        upstream = theirs[name]
        assert [_field_shape(f) for f in message.field] == \
            [_field_shape(f) for f in upstream.field], name
        assert [(e.name, [(v.name, v.number) for v in e.value]) for e in message.enum_type] == \
            [(e.name, [(v.name, v.number) for v in e.value]) for e in upstream.enum_type], name
        assert [n.name for n in message.nested_type] == \
            [n.name for n in upstream.nested_type], name
        assert len(message.oneof_decl) == len(upstream.oneof_decl) == 0, name
        enum_fields += sum(f.type == FieldDescriptorProto.TYPE_ENUM for f in message.field)
    # The proto3 enum fields with implicit presence, as upstream declares them: 15, and the
    # status of ScaleResponse and ScaleStatusResponse.
    assert enum_fields == 17
    assert "SegmentsAtTime.SegmentLocation" in ours
    assert {"SuccessorResponse.SegmentEntry", "ScaleRequest.KeyRangeEntry"} <= set(ours)


def test_every_rpc_matches_upstream(files: tuple[FileProto, FileProto]) -> None:
    (ours,), (theirs,) = files[0].service, files[1].service
    assert ours.name == theirs.name == "ControllerService"
    upstream = {m.name: m for m in theirs.method}
    assert {m.name for m in ours.method} == set(RPCS)
    for method in ours.method:
        other = upstream[method.name]
        assert (method.input_type, method.output_type) == \
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

    at_time = pb.SegmentsAtTime(segments=[pb.SegmentsAtTime.SegmentLocation(
        segmentId=pb.SegmentId(segmentId=2), offset=77)])
    parsed = upstream("SegmentsAtTime").FromString(at_time.encode())
    assert (parsed.segments[0].segmentId.segmentId, parsed.segments[0].offset) == (2, 77)

    # An enum field with implicit presence: its zero value is the default and not written.
    status = pb.CreateScopeStatus()
    assert status.status is pb.CreateScopeStatus.Status.SUCCESS
    assert status.encode() == b"" == upstream("CreateScopeStatus")().SerializeToString()
    assert pb.CreateScopeStatus(status=pb.CreateScopeStatus.Status.SUCCESS).encode() == b""
    exists = upstream("CreateScopeStatus")(status=2).SerializeToString()
    assert pb.CreateScopeStatus.decode(exists).status == pb.CreateScopeStatus.Status.SCOPE_EXISTS
    assert pb.CreateScopeStatus(status=pb.CreateScopeStatus.Status.SCOPE_EXISTS).encode() == \
        exists
    config = upstream("StreamConfig")()
    config.streamInfo.scope = "sc"
    config.scalingPolicy.minNumSegments = 3
    config.scalingPolicy.scaleType = 1
    decoded = pb.StreamConfig.decode(config.SerializeToString())
    assert decoded.scalingPolicy is not None and decoded.scalingPolicy.minNumSegments == 3
    assert decoded.scalingPolicy.scaleType == \
        pb.ScalingPolicy.ScalingPolicyType.BY_RATE_IN_KBYTES_PER_SEC


def test_scale_successor_and_cut_bytes_parse_with_upstream_schema(
        files: tuple[FileProto, FileProto]) -> None:
    """The messages of scaling, successors and stream truncation, both ways."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(files[1])

    def upstream(name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))

    info = pb.StreamInfo(scope="sc", stream="st")
    scale = pb.ScaleRequest(streamInfo=info, sealedSegments=[0, (1 << 32) | 3],
                            newKeyRanges=[pb.ScaleRequest.KeyRangeEntry(start=0.0, end=0.5),
                                          pb.ScaleRequest.KeyRangeEntry(start=0.5, end=1.0)],
                            scaleTimestamp=12)
    parsed = upstream("ScaleRequest").FromString(scale.encode())
    assert list(parsed.sealedSegments) == [0, (1 << 32) | 3]
    assert [(r.start, r.end) for r in parsed.newKeyRanges] == [(0.0, 0.5), (0.5, 1.0)]
    assert pb.ScaleRequest.decode(parsed.SerializeToString()) == scale

    successors = pb.SuccessorResponse(segments=[pb.SuccessorResponse.SegmentEntry(
        segment=pb.SegmentRange(segmentId=pb.SegmentId(streamInfo=info, segmentId=(2 << 32) | 4),
                                minKey=0.25, maxKey=1.0),
        value=[1, (1 << 32) | 3])])
    parsed = upstream("SuccessorResponse").FromString(successors.encode())
    assert parsed.segments[0].segment.segmentId.segmentId == (2 << 32) | 4
    assert list(parsed.segments[0].value) == [1, (1 << 32) | 3]
    assert pb.SuccessorResponse.decode(parsed.SerializeToString()) == successors

    cut = upstream("StreamCut")()
    cut.streamInfo.scope = "sc"
    cut.cut[(1 << 32) | 3] = 120
    cut.cut[1] = 0
    assert pb.StreamCut.decode(cut.SerializeToString()).cut == {(1 << 32) | 3: 120, 1: 0}

    response = pb.ScaleResponse(status=pb.ScaleResponse.ScaleStreamStatus.PRECONDITION_FAILED,
                                epoch=3)
    parsed = upstream("ScaleResponse").FromString(response.encode())
    assert (parsed.status, parsed.epoch) == (2, 3)
