"""A broker's side of its calls to the master: register (method 7), heartbeat (8), close (9).

A TubeMQ broker registers with its master when it starts, reporting its id (``clientId`` in
the register, ``brokerId`` afterwards), its read and write status and its configuration: a
version number (``curBrokerConfId``), a checksum of it (``confCheckSumId``), its defaults and
one entry per topic (``brokerDefaultConfInfo``, ``brokerTopicSetConfInfo``). Heartbeats
repeat the status; the configuration goes along again when the master asks for it
(``needReportData``) or when it changed. A master that no longer knows the broker fails its
heartbeat, and the broker registers again. ``close`` takes the broker offline.

``BrokerRegistration`` does this for a broker process such as ``EmbeddedTubeMQ``'s, or for a
test standing in for one.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Mapping

from protoframe.clients.tubemq._common import Heartbeat, int32, log
from protoframe.clients.tubemq.connection import DEFAULT_TIMEOUT, TubeMQConnection
from protoframe.clients.tubemq.errors import NOT_REGISTERED, ServerError
from protoframe.generated.tubemq.master_service import (
    CloseRequestB2M,
    HeartRequestB2M,
    HeartResponseM2B,
    RegisterRequestB2M,
    RegisterResponseM2B,
)

__all__ = ["BrokerRegistration", "default_conf_info", "topic_conf_info"]

# Values this client reports for the settings it does not model: flush after 1000 messages or
# 10 seconds, delete by upstream's default schedule and retention.
_FLUSH = "1000:10000"
_DELETE = "0 0 6,18 * * ?:delete,168h"


def default_conf_info(partitions: int) -> str:
    """``brokerDefaultConfInfo``: partition count, publish and subscribe on, then the rest."""
    return f"{partitions}:true:true:{_FLUSH}:{_DELETE}"


def topic_conf_info(topic: str, partitions: int) -> str:
    """One ``brokerTopicSetConfInfo`` entry: like the defaults, then filter status 0, status 0
    and no attributes."""
    return f"{topic}:{partitions}:true:true:{_FLUSH}:{_DELETE}:0:0:"


class BrokerRegistration:
    """A broker registered with a master; create it with ``await BrokerRegistration.create()``."""

    def __init__(self, master: TubeMQConnection, broker_id: int, partitions: int,
                 topics: Mapping[str, int]) -> None:
        self.master = master
        self.broker_id = broker_id
        self.partitions = partitions
        self.topics = dict(topics)
        self.conf_id = 1
        self.heartbeats = 0  # heartbeats the master answered with success
        self.registrations = 0
        self.last_answer: RegisterResponseM2B | HeartResponseM2B | None = None
        self._report_conf = False  # send the configuration with the next heartbeat
        self._heartbeat: Heartbeat | None = None
        self._closed = False
        # One heartbeat at a time, from the background task or a direct call: the session's
        # machine allows one answer per heartbeat state.
        self._beat_lock = asyncio.Lock()

    @classmethod
    async def create(cls, master: str, broker_id: int, *, partitions: int = 1,
                     topics: Mapping[str, int] | None = None,
                     heartbeat_interval: float | None = 10.0,
                     timeout: float = DEFAULT_TIMEOUT) -> BrokerRegistration:
        """Register broker ``broker_id`` with the master ``host:port``, reporting ``topics``
        (name -> partition count) and ``partitions`` as the default partition count; then
        heartbeat every ``heartbeat_interval`` seconds (None: only when ``heartbeat`` is
        called)."""
        conn = await TubeMQConnection.open(master, timeout=timeout)
        self = cls(conn, broker_id, partitions, topics or {})
        try:
            await self.register()
        except BaseException:
            conn.close()
            raise
        self._heartbeat = Heartbeat(f"broker {broker_id}", heartbeat_interval, self.heartbeat)
        return self

    @property
    def default_conf(self) -> str:
        return default_conf_info(self.partitions)

    @property
    def topic_confs(self) -> list[str]:
        return [topic_conf_info(t, n) for t, n in sorted(self.topics.items())]

    @property
    def conf_checksum(self) -> int:
        """A checksum of the reported configuration, so the master can tell it changed."""
        text = "\n".join([self.default_conf, *self.topic_confs])
        return int32(zlib.crc32(text.encode()))

    def set_topics(self, topics: Mapping[str, int]) -> None:
        """Change the topics reported; the next heartbeat carries the new configuration."""
        self.topics = dict(topics)
        self.conf_id += 1
        self._report_conf = True

    async def register(self) -> RegisterResponseM2B:
        """Register (again) with the master; raises ``ServerError`` if it refuses."""
        master = self.master
        answer = await master.checked("REGISTER_B2M", master.requests.register_broker_to_master(
            RegisterRequestB2M(clientId=str(self.broker_id), brokerOnline=True, enableTls=False,
                               readStatusRpt=0, writeStatusRpt=0, curBrokerConfId=self.conf_id,
                               confCheckSumId=self.conf_checksum,
                               brokerDefaultConfInfo=self.default_conf,
                               brokerTopicSetConfInfo=self.topic_confs)))
        self.registrations += 1
        self._report_conf = False
        self.last_answer = answer
        return answer

    async def heartbeat(self) -> HeartResponseM2B:
        """Report to the master; a master that lost the registration gets it again (and the
        ``ServerError`` it answered with is raised)."""
        async with self._beat_lock:
            return await self._beat()

    async def _beat(self) -> HeartResponseM2B:
        master = self.master
        report = self._report_conf
        try:
            answer = await master.checked(
                "HEARTBEAT_B2M", master.requests.broker_heartbeat_to_master(
                    HeartRequestB2M(
                        brokerId=str(self.broker_id), brokerOnline=True, readStatusRpt=0,
                        writeStatusRpt=0, curBrokerConfId=self.conf_id,
                        confCheckSumId=self.conf_checksum, takeConfInfo=report,
                        takeRemovedTopicInfo=False,
                        brokerDefaultConfInfo=self.default_conf if report else None,
                        brokerTopicSetConfInfo=self.topic_confs if report else [])))
        except ServerError as exc:
            if exc.err_code == NOT_REGISTERED and not self._closed:
                log.info("broker %d: the master lost the registration; registering again",
                         self.broker_id)
                await self.register()
            raise
        self.heartbeats += 1
        self.last_answer = answer
        if report:
            self._report_conf = False
        if answer.needReportData:
            self._report_conf = True
        return answer

    async def close(self) -> None:
        """Take the broker offline at the master and close the connection (once)."""
        if self._closed:
            return
        self._closed = True
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        try:
            if self.master.is_open:
                master = self.master
                await master.checked("CLOSE_B2M", master.requests.close_broker_to_master(
                    CloseRequestB2M(brokerId=str(self.broker_id))))
        finally:
            self.master.close()
