"""What the test controller knows, and its answer to each RPC, without any gRPC.

One segment store. A stream created with N segments gets segments 0..N-1 of epoch 0, splitting
the routing-key space [0, 1) evenly; a scale seals some and creates their successors
(``streams``). Segments are created, sealed, truncated and deleted in the store's
``SegmentTable`` as the stream changes, before the RPC is answered. Method names are the RPC
names of ``ControllerService``; each takes the request message and returns the response
message (generated from ``specs/pravega/controller.proto``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from protoframe.generated.pravega import controller as pb

from ..store.segments import SegmentTable
from .streams import ScaleRefused, StreamSegment, StreamSegments

__all__ = ["ControllerState", "parse_segment_name", "segment_name"]

# Listing RPCs page with a continuation token: everything comes in the first page, and this
# token marks the (empty) page after it, so a client that pages until it is empty stops.
_LAST_PAGE = "end"


def segment_name(scope: str, stream: str, segment_id: int) -> str:
    """The segment store's name of a stream segment: number and epoch from the packed id."""
    number, epoch = segment_id & 0xFFFFFFFF, segment_id >> 32
    return f"{scope}/{stream}/{number}.#epoch.{epoch}"


def parse_segment_name(name: str) -> tuple[str, str, int]:
    """Scope, stream and packed segment id of a name ``segment_name`` made."""
    scope, stream, last = _split_name(name)
    number, _, epoch = last.partition(".#epoch.")
    if not (number.isdigit() and epoch.isdigit()):
        raise ValueError(f"not a stream segment name: {name!r}")
    return scope, stream, (int(epoch) << 32) | int(number)


def _split_name(name: str) -> tuple[str, str, str]:
    parts = name.split("/")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"not a stream segment name: {name!r}")
    return parts[0], parts[1], parts[2]


@dataclass
class _Stream:
    config: pb.StreamConfig
    segments: StreamSegments
    sealed: bool = False
    # The segments of the last truncation's stream cut: where a reader starting at the head
    # of the stream starts (epoch 0 until the stream is truncated).
    head: list[int] | None = None


@dataclass
class ControllerState:
    """Scopes, streams and reader groups; ``store`` is the one segment store's address."""

    table: SegmentTable
    store: tuple[str, int]
    controller: tuple[str, int] = ("127.0.0.1", 0)
    scopes: set[str] = field(default_factory=set)
    streams: dict[tuple[str, str], _Stream] = field(default_factory=dict)
    reader_groups: dict[tuple[str, str], pb.ReaderGroupConfiguration] = field(
        default_factory=dict)

    # ---- membership --------------------------------------------------------------------------

    def getControllerServerList(self, request: pb.ServerRequest) -> pb.ServerResponse:
        host, port = self.controller
        return pb.ServerResponse(nodeURI=[pb.NodeUri(endpoint=host, port=port)])

    # ---- scopes ----------------------------------------------------------------------------

    def createScope(self, request: pb.ScopeInfo) -> pb.CreateScopeStatus:
        status = pb.CreateScopeStatus.Status
        if not request.scope:
            return pb.CreateScopeStatus(status=status.INVALID_SCOPE_NAME)
        if request.scope in self.scopes:
            return pb.CreateScopeStatus(status=status.SCOPE_EXISTS)
        self.scopes.add(request.scope)
        return pb.CreateScopeStatus(status=status.SUCCESS)

    def checkScopeExists(self, request: pb.ScopeInfo) -> pb.ExistsResponse:
        return pb.ExistsResponse(exists=request.scope in self.scopes)

    def deleteScope(self, request: pb.ScopeInfo) -> pb.DeleteScopeStatus:
        status = pb.DeleteScopeStatus.Status
        if request.scope not in self.scopes:
            return pb.DeleteScopeStatus(status=status.SCOPE_NOT_FOUND)
        if any(scope == request.scope for scope, _ in self.streams):
            return pb.DeleteScopeStatus(status=status.SCOPE_NOT_EMPTY)
        self.scopes.discard(request.scope)
        return pb.DeleteScopeStatus(status=status.SUCCESS)

    def listScopes(self, request: pb.ScopesRequest) -> pb.ScopesResponse:
        token = request.continuationToken.token if request.continuationToken else ""
        scopes = [] if token == _LAST_PAGE else sorted(self.scopes)
        return pb.ScopesResponse(scopes=scopes,
                                 continuationToken=pb.ContinuationToken(token=_LAST_PAGE))

    # ---- streams ---------------------------------------------------------------------------

    def createStream(self, request: pb.StreamConfig) -> pb.CreateStreamStatus:
        """Create the stream and its ``minNumSegments`` segments (at least one) in the store."""
        status = pb.CreateStreamStatus.Status
        info = request.streamInfo or pb.StreamInfo()
        if info.scope not in self.scopes:
            return pb.CreateStreamStatus(status=status.SCOPE_NOT_FOUND)
        if not info.stream:
            return pb.CreateStreamStatus(status=status.INVALID_STREAM_NAME)
        if (info.scope, info.stream) in self.streams:
            return pb.CreateStreamStatus(status=status.STREAM_EXISTS)
        policy = request.scalingPolicy
        count = max(1, policy.minNumSegments if policy is not None else 1)
        stream = _Stream(request, StreamSegments.even(count))
        self.streams[(info.scope, info.stream)] = stream
        for segment in stream.segments.current:
            self.table.create(segment_name(info.scope, info.stream, segment.id))
        return pb.CreateStreamStatus(status=status.SUCCESS)

    def checkStreamExists(self, request: pb.StreamInfo) -> pb.ExistsResponse:
        return pb.ExistsResponse(exists=(request.scope, request.stream) in self.streams)

    def getStreamConfiguration(self, request: pb.StreamInfo) -> pb.StreamConfig:
        stream = self.streams.get((request.scope, request.stream))
        return stream.config if stream is not None else pb.StreamConfig()

    def updateStream(self, request: pb.StreamConfig) -> pb.UpdateStreamStatus:
        status = pb.UpdateStreamStatus.Status
        info = request.streamInfo or pb.StreamInfo()
        stream = self.streams.get((info.scope, info.stream))
        if stream is None:
            return pb.UpdateStreamStatus(status=status.STREAM_NOT_FOUND)
        stream.config = request  # scaling policy changes are kept but never acted on
        return pb.UpdateStreamStatus(status=status.SUCCESS)

    def sealStream(self, request: pb.StreamInfo) -> pb.UpdateStreamStatus:
        status = pb.UpdateStreamStatus.Status
        stream = self.streams.get((request.scope, request.stream))
        if stream is None:
            return pb.UpdateStreamStatus(status=status.STREAM_NOT_FOUND)
        stream.sealed = True
        self._seal(request.scope, request.stream, [s.id for s in stream.segments.current])
        return pb.UpdateStreamStatus(status=status.SUCCESS)

    def truncateStream(self, request: pb.StreamCut) -> pb.UpdateStreamStatus:
        """Drop the stream's data before the stream cut: each segment of the cut is truncated
        at its offset, and the segments wholly before it are deleted, as Pravega does.

        A cut that is not a position of the whole stream (its segments must cover the key
        space once) or an offset below 0 or past its segment's end fails, changing nothing.
        An offset at or below a segment's start offset leaves that segment as it is.
        """
        status = pb.UpdateStreamStatus.Status
        info = request.streamInfo or pb.StreamInfo()
        stream = self.streams.get((info.scope, info.stream))
        if stream is None:
            return pb.UpdateStreamStatus(status=status.STREAM_NOT_FOUND)
        cut = dict(request.cut)
        if not stream.segments.is_cut(cut):
            return pb.UpdateStreamStatus(status=status.FAILURE)
        segments = {i: self.table.get(segment_name(info.scope, info.stream, i)) for i in cut}
        for i, offset in cut.items():
            segment = segments[i]
            limit = self.table.truncation_limit(segment) if segment is not None else None
            if offset < 0 or segment is None or (limit is not None and offset > limit):
                return pb.UpdateStreamStatus(status=status.FAILURE)
        for i, offset in sorted(cut.items()):
            segment = segments[i]
            if segment is not None and offset > segment.start_offset:
                self.table.truncate(segment, offset)
        for i in sorted(stream.segments.before(cut)):
            self.table.delete(segment_name(info.scope, info.stream, i))
        stream.head = sorted(cut)
        return pb.UpdateStreamStatus(status=status.SUCCESS)

    def deleteStream(self, request: pb.StreamInfo) -> pb.DeleteStreamStatus:
        """Delete a sealed stream and its segments."""
        status = pb.DeleteStreamStatus.Status
        stream = self.streams.get((request.scope, request.stream))
        if stream is None:
            return pb.DeleteStreamStatus(status=status.STREAM_NOT_FOUND)
        if not stream.sealed:
            return pb.DeleteStreamStatus(status=status.STREAM_NOT_SEALED)
        for segment_id in stream.segments.segments:
            self.table.delete(segment_name(request.scope, request.stream, segment_id))
        del self.streams[(request.scope, request.stream)]
        return pb.DeleteStreamStatus(status=status.SUCCESS)

    def listStreamsInScope(self, request: pb.StreamsInScopeRequest) -> pb.StreamsInScopeResponse:
        status = pb.StreamsInScopeResponse.Status
        scope = request.scope.scope if request.scope is not None else ""
        if scope not in self.scopes:
            return pb.StreamsInScopeResponse(status=status.SCOPE_NOT_FOUND)
        token = request.continuationToken.token if request.continuationToken else ""
        names = [] if token == _LAST_PAGE else sorted(s for c, s in self.streams if c == scope)
        return pb.StreamsInScopeResponse(
            streams=[pb.StreamInfo(scope=scope, stream=name) for name in names],
            continuationToken=pb.ContinuationToken(token=_LAST_PAGE), status=status.SUCCESS)

    # ---- segments --------------------------------------------------------------------------

    def getCurrentSegments(self, request: pb.StreamInfo) -> pb.SegmentRanges:
        """The stream's open segments with their key ranges; none once it is sealed."""
        stream = self.streams.get((request.scope, request.stream))
        current = stream.segments.current if stream is not None and not stream.sealed else []
        return pb.SegmentRanges(segmentRanges=[
            _range(request.scope, request.stream, s) for s in current])

    def getEpochSegments(self, request: pb.GetEpochSegmentsRequest) -> pb.SegmentRanges:
        info = request.streamInfo or pb.StreamInfo()
        stream = self.streams.get((info.scope, info.stream))
        epoch = stream.segments.in_epoch(request.epoch) if stream is not None else []
        return pb.SegmentRanges(segmentRanges=[
            _range(info.scope, info.stream, s) for s in epoch])

    def getSegments(self, request: pb.GetSegmentsRequest) -> pb.SegmentsAtTime:
        """The head of the stream, whatever the time asked: the segments of its last
        truncation (of epoch 0 before any), each at its start offset, so a reader group that
        starts at the head skips what was truncated."""
        info = request.streamInfo or pb.StreamInfo()
        stream = self.streams.get((info.scope, info.stream))
        if stream is None:
            head: list[int] = []
        else:
            head = stream.head if stream.head is not None else stream.segments.epochs[0]
        return pb.SegmentsAtTime(segments=[
            pb.SegmentsAtTime.SegmentLocation(
                segmentId=pb.SegmentId(streamInfo=_info(info.scope, info.stream),
                                       segmentId=i),
                offset=self._start_offset(info.scope, info.stream, i))
            for i in head])

    def _start_offset(self, scope: str, stream: str, segment_id: int) -> int:
        segment = self.table.get(segment_name(scope, stream, segment_id))
        return segment.start_offset if segment is not None else 0

    def getSegmentsImmediatelyFollowing(self, request: pb.SegmentId) -> pb.SuccessorResponse:
        """The segments that replaced a sealed one, each with all its predecessors."""
        info = request.streamInfo or pb.StreamInfo()
        stream = self.streams.get((info.scope, info.stream))
        following = stream.segments.following(request.segmentId) if stream is not None else []
        return pb.SuccessorResponse(segments=[
            pb.SuccessorResponse.SegmentEntry(segment=_range(info.scope, info.stream, s),
                                              value=list(s.predecessors))
            for s in following])

    def getSegmentsImmediatlyFollowing(self, request: pb.SegmentId) -> pb.SuccessorResponse:
        return self.getSegmentsImmediatelyFollowing(request)

    def scale(self, request: pb.ScaleRequest) -> pb.ScaleResponse:
        """Seal ``sealedSegments`` and create segments for ``newKeyRanges`` at once (the
        answer's epoch is the one the scale started from; ``checkScale`` reports it done)."""
        status = pb.ScaleResponse.ScaleStreamStatus
        info = request.streamInfo or pb.StreamInfo()
        stream = self.streams.get((info.scope, info.stream))
        if stream is None or stream.sealed:
            return pb.ScaleResponse(status=status.FAILURE)
        epoch = stream.segments.epoch
        try:
            created = stream.segments.scale(
                request.sealedSegments, [(r.start, r.end) for r in request.newKeyRanges])
        except ScaleRefused:
            return pb.ScaleResponse(status=status.PRECONDITION_FAILED, epoch=epoch)
        # Successors exist before their predecessors are sealed, so a writer refused by a
        # sealed segment always finds where to go.
        for segment in created:
            self.table.create(segment_name(info.scope, info.stream, segment.id))
        self._seal(info.scope, info.stream, sorted(set(request.sealedSegments)))
        return pb.ScaleResponse(status=status.STARTED, epoch=epoch, segments=[
            _range(info.scope, info.stream, s) for s in created])

    def checkScale(self, request: pb.ScaleStatusRequest) -> pb.ScaleStatusResponse:
        """A scale from ``epoch`` is done once the stream is past it (ours finish at once)."""
        status = pb.ScaleStatusResponse.ScaleStatus
        info = request.streamInfo or pb.StreamInfo()
        stream = self.streams.get((info.scope, info.stream))
        if stream is None or request.epoch >= stream.segments.epoch or request.epoch < 0:
            return pb.ScaleStatusResponse(status=status.INVALID_INPUT)
        return pb.ScaleStatusResponse(status=status.SUCCESS)

    def _seal(self, scope: str, stream: str, ids: list[int]) -> None:
        for segment_id in ids:
            segment = self.table.get(segment_name(scope, stream, segment_id))
            if segment is not None:
                self.table.seal(segment)

    def getURI(self, request: pb.SegmentId) -> pb.NodeUri:
        """The one segment store owns every segment."""
        host, port = self.store
        return pb.NodeUri(endpoint=host, port=port)

    def isSegmentValid(self, request: pb.SegmentId) -> pb.SegmentValidityResponse:
        info = request.streamInfo or pb.StreamInfo()
        segment = self.table.get(segment_name(info.scope, info.stream, request.segmentId))
        return pb.SegmentValidityResponse(response=segment is not None and not segment.sealed)

    def getDelegationToken(self, request: pb.StreamInfo) -> pb.DelegationToken:
        return pb.DelegationToken(delegationToken="")  # the store checks no tokens

    # ---- writers ---------------------------------------------------------------------------

    def removeWriter(self, request: pb.RemoveWriterRequest) -> pb.RemoveWriterResponse:
        return pb.RemoveWriterResponse(result=pb.RemoveWriterResponse.Status.SUCCESS)

    def noteTimestampFromWriter(self, request: pb.TimestampFromWriter) -> pb.TimestampResponse:
        return pb.TimestampResponse(result=pb.TimestampResponse.Status.SUCCESS)

    # ---- reader groups ---------------------------------------------------------------------

    def createReaderGroup(self, request: pb.ReaderGroupConfiguration
                          ) -> pb.CreateReaderGroupResponse:
        """Record the group's configuration (its id made up when empty); idempotent."""
        status = pb.CreateReaderGroupResponse.Status
        if request.scope not in self.scopes:
            return pb.CreateReaderGroupResponse(status=status.SCOPE_NOT_FOUND)
        key = (request.scope, request.readerGroupName)
        config = self.reader_groups.get(key)
        if config is None:
            config = pb.ReaderGroupConfiguration.decode(request.encode())
            config.readerGroupId = config.readerGroupId or str(uuid.uuid4())
            self.reader_groups[key] = config
        return pb.CreateReaderGroupResponse(status=status.SUCCESS, config=config)

    def getReaderGroupConfig(self, request: pb.ReaderGroupInfo) -> pb.ReaderGroupConfigResponse:
        status = pb.ReaderGroupConfigResponse.Status
        config = self.reader_groups.get((request.scope, request.readerGroup))
        if config is None:
            return pb.ReaderGroupConfigResponse(status=status.RG_NOT_FOUND)
        return pb.ReaderGroupConfigResponse(status=status.SUCCESS, config=config)

    def updateReaderGroup(self, request: pb.ReaderGroupConfiguration
                          ) -> pb.UpdateReaderGroupResponse:
        status = pb.UpdateReaderGroupResponse.Status
        key = (request.scope, request.readerGroupName)
        old = self.reader_groups.get(key)
        if old is None:
            return pb.UpdateReaderGroupResponse(status=status.RG_NOT_FOUND)
        config = pb.ReaderGroupConfiguration.decode(request.encode())
        config.generation = old.generation + 1
        self.reader_groups[key] = config
        return pb.UpdateReaderGroupResponse(status=status.SUCCESS, generation=config.generation)

    def deleteReaderGroup(self, request: pb.ReaderGroupInfo) -> pb.DeleteReaderGroupStatus:
        status = pb.DeleteReaderGroupStatus.Status
        if self.reader_groups.pop((request.scope, request.readerGroup), None) is None:
            return pb.DeleteReaderGroupStatus(status=status.RG_NOT_FOUND)
        return pb.DeleteReaderGroupStatus(status=status.SUCCESS)


def _range(scope: str, stream: str, segment: StreamSegment) -> pb.SegmentRange:
    return pb.SegmentRange(segmentId=pb.SegmentId(streamInfo=_info(scope, stream),
                                                  segmentId=segment.id),
                           minKey=segment.low, maxKey=segment.high)


def _info(scope: str, stream: str) -> pb.StreamInfo:
    return pb.StreamInfo(scope=scope, stream=stream)
