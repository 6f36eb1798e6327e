"""The embedded TubeMQ broker: messages in memory per topic and partition, handed to consumer
groups, each with its own fetch position and committed offset per partition.

Each handler takes a decoded request body and returns the response body; ``handlers`` maps
the request names to them (``server`` answers frames with them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from protoframe.clients.tubemq._common import checksum
from protoframe.clients.tubemq.errors import BAD_REQUEST, NOT_FOUND, SUCCESS
from protoframe.clients.tubemq.partition import OP_REGISTER, OP_UNREGISTER
from protoframe.generated.tubemq import broker_service as bs

from .state import Group, PeerState, Stored

__all__ = ["MAX_BATCH", "Broker"]

MAX_BATCH = 32  # messages per GET_MESSAGE answer


class Broker:
    """The broker's calls over ``state``."""

    def __init__(self, state: PeerState) -> None:
        self.state = state
        self.handlers: dict[str, Callable[[Any], Any]] = {
            "SEND_MESSAGE_P2B": self._send_message, "REGISTER_C2B": self._register_c2b,
            "HEARTBEAT_C2B": self._heartbeat_c2b, "GET_MESSAGE_C2B": self._get_message,
            "COMMIT_OFFSET_C2B": self._commit_offset,
        }

    def messages(self, topic: str, partition: int) -> list[Stored]:
        """What the broker holds for one partition."""
        return list(self.state.log_of(topic)[partition])
    def _partition_error(self, topic: str, partition: int) -> str | None:
        if not topic:
            return "topicName is required"
        if not 0 <= partition < self.state.partitions:
            return f"{topic} has no partition {partition}"
        return None

    def _send_message(self, body: bs.SendMessageRequestP2B) -> bs.SendMessageResponseB2P:
        problem = self._partition_error(body.topicName, body.partitionId)
        if problem is None and body.checkSum != -1 and body.checkSum != checksum(body.data):
            problem = "checkSum does not match the data"
        if problem is not None:
            return bs.SendMessageResponseB2P(success=False, errCode=BAD_REQUEST, errMsg=problem)
        log_ = self.state.log_of(body.topicName)[body.partitionId]
        now = int(time.time() * 1000)
        stored = Stored(self.state.next_id, body.data, body.flag, checksum(body.data), now)
        self.state.next_id += 1
        log_.append(stored)
        return bs.SendMessageResponseB2P(success=True, errCode=SUCCESS, errMsg="OK",
                                         messageId=stored.message_id, appendTime=now,
                                         appendOffset=len(log_) - 1)

    def _register_c2b(self, body: bs.RegisterRequestC2B) -> bs.RegisterResponseB2C:
        problem = self._partition_error(body.topicName, body.partitionId)
        if problem is not None or body.opType not in (OP_REGISTER, OP_UNREGISTER):
            return bs.RegisterResponseB2C(success=False, errCode=BAD_REQUEST,
                                          errMsg=problem or f"unknown opType {body.opType}")
        where = (body.groupName, body.topicName, body.partitionId)
        group = self.state.groups.setdefault(where, Group())
        size = len(self.state.log_of(body.topicName)[body.partitionId])
        if body.opType == OP_UNREGISTER:
            # Only the holder's release counts: a consumer the master already moved on from
            # must not free a partition someone else has taken since.
            if self.state.holders.get(where) == body.clientId:
                del self.state.holders[where]
        else:
            self.state.holders[where] = body.clientId
            group.fetched = group.committed  # what was fetched and not committed comes again
        return bs.RegisterResponseB2C(success=True, errCode=SUCCESS, errMsg="OK",
                                      currOffset=group.committed, maxOffset=size)

    def _heartbeat_c2b(self, body: bs.HeartBeatRequestC2B) -> bs.HeartBeatResponseB2C:
        return bs.HeartBeatResponseB2C(success=True, errCode=SUCCESS, errMsg="OK")

    def _get_message(self, body: bs.GetMessageRequestC2B) -> bs.GetMessageResponseB2C:
        where = (body.groupName, body.topicName, body.partitionId)
        if self.state.holders.get(where) != body.clientId:
            return bs.GetMessageResponseB2C(success=False, errCode=BAD_REQUEST,
                                            errMsg="the partition is not registered")
        group = self.state.groups[where]
        log_ = self.state.log_of(body.topicName)[body.partitionId]
        batch = log_[group.fetched:group.fetched + MAX_BATCH]
        if not batch:
            return bs.GetMessageResponseB2C(success=False, errCode=NOT_FOUND,
                                            errMsg="no new message", currOffset=group.fetched,
                                            maxOffset=len(log_))
        group.fetched += len(batch)
        if not body.manualCommitOffset:
            group.committed = group.fetched
        return bs.GetMessageResponseB2C(
            success=True, errCode=SUCCESS, errMsg="OK", currOffset=group.fetched,
            maxOffset=len(log_),
            messages=[bs.TransferedMessage(messageId=m.message_id, checkSum=m.checksum,
                                           payLoadData=m.data, flag=m.flag) for m in batch])

    def _commit_offset(self, body: bs.CommitOffsetRequestC2B) -> bs.CommitOffsetResponseB2C:
        where = (body.groupName, body.topicName, body.partitionId)
        group = self.state.groups.get(where)
        if group is None or self.state.holders.get(where) != body.clientId:
            return bs.CommitOffsetResponseB2C(success=False, errCode=BAD_REQUEST,
                                              errMsg="the partition is not registered")
        if body.lastPackConsumed:
            group.committed = group.fetched
        size = len(self.state.log_of(body.topicName)[body.partitionId])
        return bs.CommitOffsetResponseB2C(success=True, errCode=SUCCESS, errMsg="OK",
                                          currOffset=group.committed, maxOffset=size)
