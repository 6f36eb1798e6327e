"""The master calls added to the TubeMQ spec: the broker's own register / heartbeat / close
(methods 7 to 9) and the v2 consumer calls (20 to 22).

Round trips through frames (hypothesis), hand-written bytes, the state machines on both
sides, and over TCP on 127.0.0.1 against ``EmbeddedTubeMQ``: a v2 consumer and a broker's
registration with the master. Every network scenario runs under ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.clients.tubemq import (
    BrokerRegistration,
    Consumer,
    EmbeddedTubeMQ,
    MasterStandby,
    Producer,
    ServerError,
    TubeMQConnection,
)
from protoframe.clients.tubemq.broker_link import topic_conf_info
from protoframe.clients.tubemq.errors import BAD_REQUEST, NOT_REGISTERED, SUCCESS
from protoframe.clients.tubemq.topics import TopicPartitions
from protoframe.generated.tubemq import machines as m
from protoframe.generated.tubemq import master_service as ms
from protoframe.generated.tubemq.client import TubemqRequests
from protoframe.generated.tubemq.frames import Frame, StreamDecoder
from protoframe.generated.tubemq.machines import TubemqProtocol
from protoframe.generated.tubemq.rpc import RspExceptionBody
from protoframe.runtime.engine.machine import ProtocolViolation
from tests.support.examples import scaled
from tests.support.tubemq_commands import Loopback, frame_bytes, messages

Builder = Callable[..., Frame]

# (method id, request, its builder and body class, response, its builder and body class)
NEW_CALLS: list[tuple[int, str, Builder, type, str, Builder, type]] = [
    (7, "REGISTER_B2M", m.frame_of_register_b2m, ms.RegisterRequestB2M,
     "REGISTER_M2B", m.frame_of_register_m2b, ms.RegisterResponseM2B),
    (8, "HEARTBEAT_B2M", m.frame_of_heartbeat_b2m, ms.HeartRequestB2M,
     "HEARTBEAT_M2B", m.frame_of_heartbeat_m2b, ms.HeartResponseM2B),
    (9, "CLOSE_B2M", m.frame_of_close_b2m, ms.CloseRequestB2M,
     "CLOSE_M2B", m.frame_of_close_m2b, ms.CloseResponseM2B),
    (20, "REGISTER_C2M_V2", m.frame_of_register_c2m_v2, ms.RegisterRequestC2MV2,
     "REGISTER_M2C_V2", m.frame_of_register_m2c_v2, ms.RegisterResponseM2CV2),
    (21, "HEARTBEAT_C2M_V2", m.frame_of_heartbeat_c2m_v2, ms.HeartRequestC2MV2,
     "HEARTBEAT_M2C_V2", m.frame_of_heartbeat_m2c_v2, ms.HeartResponseM2CV2),
    (22, "GET_PART_META_C2M", m.frame_of_get_part_meta_c2m, ms.GetPartMetaRequestC2M,
     "GET_PART_META_M2C", m.frame_of_get_part_meta_m2c, ms.GetPartMetaResponseM2C),
]
IDS = [c[1] for c in NEW_CALLS]
TIMEOUT = 15.0


# -- frames -------------------------------------------------------------------------------------


@pytest.mark.parametrize("call", NEW_CALLS, ids=IDS)
@settings(max_examples=scaled(30), deadline=None)
@given(data=st.data(), serial_no=st.integers(0, 2**32 - 1))
def test_request_and_response_round_trip(call: tuple[Any, ...], data: st.DataObject,
                                         serial_no: int) -> None:
    method, req_name, req_build, req_cls, rsp_name, rsp_build, rsp_cls = call
    for name, build, cls in ((req_name, req_build, req_cls), (rsp_name, rsp_build, rsp_cls)):
        body = data.draw(messages(cls))
        frame = build(body, serial_no=serial_no)
        wire = frame.encode()
        cut = data.draw(st.integers(0, len(wire)))
        decoder = StreamDecoder()
        [decoded] = decoder.feed(wire[:cut]) + decoder.feed(wire[cut:])
        assert decoded == frame
        assert m.command_of(decoded) == (name, body)
        assert m.frame_of(name, body, serial_no=serial_no) == frame
        request, response = decoded.content.request, decoded.content.response
        if name == req_name:
            assert request is not None and decoded.content.conn_header.flag == 0
            assert request.body.method == method
            # Every one of them is a master call.
            assert (request.header.serviceType, request.header.protocolVer) == (1, 3)
        else:
            assert response is not None and response.body is not None
            assert decoded.content.conn_header.flag == 1
            assert response.body.method == method


def test_every_new_call_is_a_typed_request() -> None:
    names = {i.request: i for i in m.INTERACTIONS}
    for _, req_name, _, _, rsp_name, _, _ in NEW_CALLS:
        assert names[req_name].answers == frozenset({rsp_name, "EXCEPTION"})
    for method in ("register_broker_to_master", "broker_heartbeat_to_master",
                   "close_broker_to_master", "register_consumer_to_master_v2",
                   "consumer_heartbeat_to_master_v2", "get_part_meta_from_master"):
        assert callable(getattr(TubemqRequests, method))


# CloseRequestB2M{brokerId "7"} = 0a 01 37, in RequestBody{method 9, request <it>} =
# 08 09 1a 03 0a0137, behind RpcConnHeader{flag 0} and RequestHeader{serviceType 1,
# protocolVer 3}.
CLOSE_B2M_CONTENT = b"\x02\x08\x00" + b"\x04\x08\x01\x10\x03" + bytes.fromhex("07 0809 1a03 0a0137")
# GetPartMetaResponseM2C{errCode 200, errMsg "", topicMetaInfoId 5} = 08 c801 12 00 20 05, in
# RspResponseBody{method 22, data <it>} = 08 16 12 07 ..., behind flag 1 and
# ResponseHeader{status SUCCESS, protocolVer 3}.
PART_META_CONTENT = (b"\x02\x08\x01" + b"\x04\x08\x00\x18\x03"
                     + bytes.fromhex("0b 0816 1207 08c801 1200 2005"))


def test_hand_written_bytes() -> None:
    close = ms.CloseRequestB2M(brokerId="7")
    wire = frame_bytes(0x0A0B0C0D, CLOSE_B2M_CONTENT)
    assert m.frame_of_close_b2m(close, serial_no=0x0A0B0C0D).encode() == wire
    assert m.command_of(Frame.decode(wire)) == ("CLOSE_B2M", close)
    meta = ms.GetPartMetaResponseM2C(errCode=200, errMsg="", topicMetaInfoId=5)
    wire = frame_bytes(3, PART_META_CONTENT)
    assert m.frame_of_get_part_meta_m2c(meta, serial_no=3).encode() == wire
    assert struct.unpack_from(">I", wire, 4)[0] == 3
    assert m.command_of(Frame.decode(wire)) == ("GET_PART_META_M2C", meta)


# -- state machines -----------------------------------------------------------------------------


def reg_b2m(broker: str = "7") -> ms.RegisterRequestB2M:
    return ms.RegisterRequestB2M(clientId=broker, brokerOnline=True, enableTls=False,
                                 readStatusRpt=0, writeStatusRpt=0, curBrokerConfId=1,
                                 confCheckSumId=0, brokerDefaultConfInfo="1")


def reg_m2b(success: bool = True) -> ms.RegisterResponseM2B:
    return ms.RegisterResponseM2B(success=success, errCode=SUCCESS if success else BAD_REQUEST,
                                  errMsg="", stopRead=False, stopWrite=False,
                                  takeConfInfo=False)


def heart_b2m(broker: str = "7") -> ms.HeartRequestB2M:
    return ms.HeartRequestB2M(brokerId=broker, brokerOnline=True, readStatusRpt=0,
                              writeStatusRpt=0, curBrokerConfId=1, confCheckSumId=0,
                              takeConfInfo=False, takeRemovedTopicInfo=False)


def heart_m2b(success: bool = True) -> ms.HeartResponseM2B:
    return ms.HeartResponseM2B(success=success, errCode=SUCCESS if success else NOT_REGISTERED,
                               errMsg="", stopRead=False, stopWrite=False, curBrokerConfId=1,
                               confCheckSumId=0, needReportData=False, takeConfInfo=False,
                               takeRemoveTopicInfo=False)


def reg_c2m_v2(client: str = "c") -> ms.RegisterRequestC2MV2:
    return ms.RegisterRequestC2MV2(clientId=client, groupName="g", hostName="h",
                                   sourceCount=1, nodeId=0, topicList=["t"])


def heart_c2m_v2(client: str = "c") -> ms.HeartRequestC2MV2:
    return ms.HeartRequestC2MV2(clientId=client, groupName="g")


def meta_c2m(client: str = "c") -> ms.GetPartMetaRequestC2M:
    return ms.GetPartMetaRequestC2M(clientId=client, groupName="g", brokerConfigId=-1,
                                    topicMetaInfoId=-1)


class Wire:
    """A client-side protocol object, fed frames by hand."""

    def __init__(self, *, server: bool = False) -> None:
        self.protocol = TubemqProtocol(server=server)
        self.serial = 0

    def send(self, name: str, body: Any) -> int:
        self.serial += 1
        self.protocol.send(m.frame_of(name, body, serial_no=self.serial))
        return self.serial

    def receive(self, name: str, body: Any, serial_no: int) -> None:
        self.protocol.receive_data(m.frame_of(name, body, serial_no=serial_no).encode())

    def state(self, machine: str, key: str | None = None) -> str:
        return self.protocol.state(machine, key)


def test_broker_session() -> None:
    wire = Wire()
    assert wire.state("broker") == "idle"
    serial = wire.send("REGISTER_B2M", reg_b2m())
    assert wire.state("broker") == "registering"
    wire.receive("REGISTER_M2B", reg_m2b(), serial)
    assert wire.state("broker") == "registered"
    serial = wire.send("HEARTBEAT_B2M", heart_b2m())
    assert wire.state("broker") == "heartbeating"
    wire.receive("HEARTBEAT_M2B", heart_m2b(), serial)
    assert wire.state("broker") == "registered"
    # The master lost the broker: a failed heartbeat sends it back to register.
    serial = wire.send("HEARTBEAT_B2M", heart_b2m())
    wire.receive("HEARTBEAT_M2B", heart_m2b(success=False), serial)
    assert wire.state("broker") == "idle"
    with pytest.raises(ProtocolViolation):
        wire.send("HEARTBEAT_B2M", heart_b2m())
    serial = wire.send("REGISTER_B2M", reg_b2m())
    wire.receive("REGISTER_M2B", reg_m2b(), serial)
    # A heartbeat answered while closing is fine; the close ends the session.
    beat = wire.send("HEARTBEAT_B2M", heart_b2m())
    close = wire.send("CLOSE_B2M", ms.CloseRequestB2M(brokerId="7"))
    assert wire.state("broker") == "closing"
    wire.receive("HEARTBEAT_M2B", heart_m2b(), beat)
    wire.receive("CLOSE_M2B", ms.CloseResponseM2B(success=True, errCode=200, errMsg=""), close)
    assert wire.state("broker") == "closed"  # final state reached: the session ends there


def test_broker_refused_or_failing() -> None:
    wire = Wire()
    serial = wire.send("REGISTER_B2M", reg_b2m())
    wire.receive("REGISTER_M2B", reg_m2b(success=False), serial)
    assert wire.state("broker") == "closed"
    serial = wire.send("REGISTER_B2M", reg_b2m())
    wire.receive("EXCEPTION", RspExceptionBody(exceptionName="E"), serial)
    assert wire.state("broker") == "closed"


@pytest.mark.parametrize(("name", "body"), [
    ("REGISTER_M2B", reg_m2b()),
    ("HEARTBEAT_M2B", heart_m2b()),
    ("CLOSE_M2B", ms.CloseResponseM2B(success=True, errCode=200, errMsg="")),
], ids=["register", "heartbeat", "close"])
def test_broker_answer_before_its_request(name: str, body: Any) -> None:
    wire = Wire()
    with pytest.raises(ProtocolViolation, match=f"broker: cannot receive {name}"):
        wire.receive(name, body, 1)


def test_broker_calls_out_of_order() -> None:
    wire = Wire()
    with pytest.raises(ProtocolViolation, match="cannot send HEARTBEAT_B2M in state 'idle'"):
        wire.send("HEARTBEAT_B2M", heart_b2m())
    with pytest.raises(ProtocolViolation, match="cannot send CLOSE_B2M"):
        wire.send("CLOSE_B2M", ms.CloseRequestB2M(brokerId="7"))
    serial = wire.send("REGISTER_B2M", reg_b2m())
    with pytest.raises(ProtocolViolation, match="cannot send REGISTER_B2M"):
        wire.send("REGISTER_B2M", reg_b2m())  # again, before the answer
    # The answer to the register cannot be a close's.
    with pytest.raises(ProtocolViolation, match="cannot receive CLOSE_M2B"):
        wire.receive("CLOSE_M2B", ms.CloseResponseM2B(success=True, errCode=200, errMsg=""),
                     serial)


def test_master_side_refuses_a_heartbeat_before_the_register() -> None:
    master = Wire(server=True)
    with pytest.raises(ProtocolViolation, match="broker: cannot send HEARTBEAT_B2M"):
        master.receive("HEARTBEAT_B2M", heart_b2m(), 1)
    master = Wire(server=True)
    with pytest.raises(ProtocolViolation, match="consumer 'c': cannot send HEARTBEAT_C2M_V2"):
        master.receive("HEARTBEAT_C2M_V2", heart_c2m_v2(), 1)


def test_v2_consumer_session() -> None:
    wire = Wire()
    serial = wire.send("REGISTER_C2M_V2", reg_c2m_v2())
    assert wire.state("consumer", "c") == "registering_v2"
    wire.receive("REGISTER_M2C_V2", ms.RegisterResponseM2CV2(errCode=200, errMsg=""), serial)
    assert wire.state("consumer", "c") == "registered_v2"
    meta = wire.send("GET_PART_META_C2M", meta_c2m())
    beat = wire.send("HEARTBEAT_C2M_V2", heart_c2m_v2())  # overlapping the metadata fetch
    assert wire.state("consumer", "c") == "heartbeating_v2"
    wire.receive("GET_PART_META_M2C", ms.GetPartMetaResponseM2C(errCode=200, errMsg=""), meta)
    assert wire.state("consumer", "c") == "heartbeating_v2"
    wire.receive("HEARTBEAT_M2C_V2", ms.HeartResponseM2CV2(errCode=200, errMsg=""), beat)
    assert wire.state("consumer", "c") == "registered_v2"
    # v1 heartbeats are not part of a v2 session.
    with pytest.raises(ProtocolViolation, match="cannot send HEARTBEAT_C2M in state"):
        wire.send("HEARTBEAT_C2M", ms.HeartRequestC2M(clientId="c", groupName="g",
                                                      reportSubscribeInfo=False))
    close = wire.send("CLOSE_C2M", ms.CloseRequestC2M(clientId="c", groupName="g"))
    assert wire.state("consumer", "c") == "closing"
    wire.receive("CLOSE_M2C", ms.CloseResponseM2C(success=True, errCode=200, errMsg=""), close)
    assert wire.state("consumer", "c") == "closed"


def test_v2_consumer_out_of_order() -> None:
    wire = Wire()
    with pytest.raises(ProtocolViolation, match="cannot send HEARTBEAT_C2M_V2 in state 'idle'"):
        wire.send("HEARTBEAT_C2M_V2", heart_c2m_v2())
    with pytest.raises(ProtocolViolation, match="cannot send GET_PART_META_C2M in state"):
        wire.send("GET_PART_META_C2M", meta_c2m())
    serial = wire.send("REGISTER_C2M_V2", reg_c2m_v2())
    with pytest.raises(ProtocolViolation, match="cannot send GET_PART_META_C2M in state "
                                                "'registering_v2'"):
        wire.send("GET_PART_META_C2M", meta_c2m())
    # A v1 answer on the register's serial number answers nothing: it names no consumer, so
    # the keyed machine leaves it alone (and the generated client drops it, see below).
    wire.receive("REGISTER_M2C", ms.RegisterResponseM2C(success=True, errCode=200, errMsg=""),
                 serial)
    assert wire.state("consumer", "c") == "registering_v2"


def test_the_client_pairs_v2_answers_by_serial_and_method() -> None:
    async def main() -> None:
        transport = Loopback()
        client = TubemqRequests(transport, timeout=5.0)
        register = asyncio.ensure_future(client.register_consumer_to_master_v2(reg_c2m_v2()))
        meta = asyncio.ensure_future(client.get_part_meta_from_master(meta_c2m()))
        while len(transport.sent) < 2:
            await asyncio.sleep(0)
        first, second = (f.serial_no for f in transport.sent)
        assert not client.handle_frame(m.frame_of_register_m2c(
            ms.RegisterResponseM2C(success=True, errCode=200, errMsg=""), serial_no=first))
        assert client.handle_frame(m.frame_of_get_part_meta_m2c(
            ms.GetPartMetaResponseM2C(errCode=200, errMsg="", topicMetaInfoId=4),
            serial_no=second))
        assert client.handle_frame(m.frame_of_register_m2c_v2(
            ms.RegisterResponseM2CV2(errCode=200, errMsg="", brokerConfigId=3),
            serial_no=first))
        assert (await register).brokerConfigId == 3
        assert (await meta).topicMetaInfoId == 4

    asyncio.run(asyncio.wait_for(main(), 10))


def test_v2_register_refused() -> None:
    wire = Wire()
    serial = wire.send("REGISTER_C2M_V2", reg_c2m_v2())
    wire.receive("REGISTER_M2C_V2", ms.RegisterResponseM2CV2(errCode=400, errMsg="no"), serial)
    assert wire.state("consumer", "c") == "closed"
    with pytest.raises(ProtocolViolation):
        wire.send("HEARTBEAT_C2M_V2", heart_c2m_v2())


def test_v2_answer_without_a_request_changes_nothing() -> None:
    # Unlike the broker session (one per connection, so an unasked answer is a violation), the
    # consumer machine is keyed by clientId, which v2 answers do not carry: an answer that
    # pairs with no request reaches no consumer (and the generated client drops it).
    wire = Wire()
    serial = wire.send("REGISTER_C2M_V2", reg_c2m_v2())
    wire.receive("HEARTBEAT_M2C_V2", ms.HeartResponseM2CV2(errCode=200, errMsg=""), serial)
    assert wire.state("consumer", "c") == "registering_v2"
    wire.receive("REGISTER_M2C_V2", ms.RegisterResponseM2CV2(errCode=200, errMsg=""), serial)
    assert wire.state("consumer", "c") == "registered_v2"


# -- over TCP against EmbeddedTubeMQ -----------------------------------------------------------

Scenario = Callable[[EmbeddedTubeMQ], Awaitable[None]]


def run(scenario: Scenario, **options: Any) -> None:
    async def main() -> None:
        async with EmbeddedTubeMQ(**options) as peer:
            await asyncio.wait_for(scenario(peer), TIMEOUT)

    asyncio.run(asyncio.wait_for(main(), TIMEOUT + 5))


def test_v2_consumer_registers_heartbeats_gets_meta_and_consumes() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        producer = await Producer.create(peer.master, "v2t", client_id="p",
                                         heartbeat_interval=None, timeout=5.0)
        sent = await producer.send(b"hello v2", partition=1)
        consumer = await Consumer.create(peer.master, "v2t", "g2", client_id="c2",
                                         master_protocol="v2", heartbeat_interval=None,
                                         timeout=5.0)
        try:
            protocol = consumer.master.protocol
            assert protocol.state("consumer", "c2") == "registered_v2"
            assert consumer.assignment == frozenset({0, 1})
            assert (consumer.broker_config_id, consumer.topic_meta_id) == (1, 1)
            member = peer.state.balanced["c2"]
            assert (member.group, member.topics) == ("g2", ["v2t"])
            assert "c2" not in peer.state.consumers  # not in the v1 rebalancing
            await consumer.heartbeat()
            assert protocol.state("consumer", "c2") == "registered_v2"
            assert peer.state.balanced["c2"].held == {("v2t", 0), ("v2t", 1)}
            assert await consumer.partition_meta() == frozenset({0, 1})
            [message] = await consumer.get_messages(1)
            assert (message.data, message.message_id) == (b"hello v2", sent.message_id)
            assert await consumer.commit(1) == 1
            assert await consumer.get_messages(1) == []
        finally:
            await consumer.close()
            await producer.close()
        assert peer.state.balanced == {}

    run(scenario)


def test_v2_typed_calls_and_the_masters_answers() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        conn = await TubeMQConnection.open(peer.master, timeout=5.0)
        try:
            calls = conn.requests
            layout = [str(TopicPartitions(peer.broker, "t", 3))]
            reg = await calls.register_consumer_to_master_v2(ms.RegisterRequestC2MV2(
                clientId="c", groupName="g", hostName="h", sourceCount=1, nodeId=0,
                topicList=["t"]))
            assert (reg.errCode, reg.brokerConfigId) == (SUCCESS, 1)
            assert reg.brokerConfigList == [str(peer.broker)]
            meta = await calls.get_part_meta_from_master(ms.GetPartMetaRequestC2M(
                clientId="c", groupName="g", brokerConfigId=-1, topicMetaInfoId=-1))
            assert (meta.errCode, meta.brokerConfigId, meta.topicMetaInfoId) == (SUCCESS, 1, 1)
            assert meta.topicMetaInfoList == layout
            assert meta.brokerConfigList == [str(peer.broker)]
            # A heartbeat from a client with old versions gets the lists, then only ids.
            stale = await calls.consumer_heartbeat_to_master_v2(ms.HeartRequestC2MV2(
                clientId="c", groupName="g"))
            assert stale.topicMetaInfoList == layout
            assert stale.brokerConfigList == [str(peer.broker)]
            fresh = await calls.consumer_heartbeat_to_master_v2(ms.HeartRequestC2MV2(
                clientId="c", groupName="g", subRepInfo=ms.ClientSubRepInfo(
                    brokerConfigId=1, topicMetaInfoId=1)))
            assert (fresh.errCode, fresh.topicMetaInfoId) == (SUCCESS, 1)
            assert (fresh.topicMetaInfoList, fresh.brokerConfigList) == ([], [])
            assert conn.protocol.state("consumer", "c") == "registered_v2"
            # A client the master does not know must register.
            with pytest.raises(ServerError) as info:
                await conn.checked_code("HEARTBEAT_C2M_V2",
                                        calls.consumer_heartbeat_to_master_v2(
                                            ms.HeartRequestC2MV2(clientId="c", groupName="x")))
            assert info.value.err_code == NOT_REGISTERED
            bad = await calls.register_consumer_to_master_v2(ms.RegisterRequestC2MV2(
                clientId="d", groupName="g", hostName="h", sourceCount=2, nodeId=2,
                topicList=["t"]))
            assert bad.errCode == BAD_REQUEST
            await calls.close_consumer_to_master(ms.CloseRequestC2M(clientId="c",
                                                                    groupName="g"))
            assert peer.state.balanced == {}
        finally:
            conn.close()

    run(scenario, partitions=3)


def test_two_v2_consumers_split_the_partitions() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        consumers = [await Consumer.create(peer.master, "split", "g", client_id=f"n{i}",
                                           master_protocol="v2", source_count=2, node_id=i,
                                           heartbeat_interval=None, timeout=5.0)
                     for i in range(2)]
        try:
            assert [c.assignment for c in consumers] == [frozenset({0, 2}), frozenset({1, 3})]
        finally:
            for c in consumers:
                await c.close()

    run(scenario, partitions=4)


def test_v2_consumer_options_are_checked() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        with pytest.raises(ValueError, match="node_id 3"):
            await Consumer.create(peer.master, "t", "g", master_protocol="v2",
                                  source_count=2, node_id=3, heartbeat_interval=None)
        v1 = await Consumer.create(peer.master, "t", "g", client_id="v1",
                                   heartbeat_interval=None, timeout=5.0)
        try:
            with pytest.raises(Exception, match="master_protocol='v2'"):
                await v1.partition_meta()
            assert v1.master.protocol.state("consumer", "v1") == "registered"
        finally:
            await v1.close()

    run(scenario)


def test_v2_calls_on_a_standby_master() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        peer.standby = True
        with pytest.raises(MasterStandby):
            await Consumer.create(peer.master, "t", "g", master_protocol="v2",
                                  heartbeat_interval=None, timeout=5.0)
        with pytest.raises(MasterStandby):
            await BrokerRegistration.create(peer.master, 5, heartbeat_interval=None,
                                            timeout=5.0)

    run(scenario)


def test_broker_registers_heartbeats_and_closes() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        link = await BrokerRegistration.create(peer.master, 42, partitions=3,
                                               topics={"t": 3}, heartbeat_interval=None,
                                               timeout=5.0)
        closed = False
        try:
            protocol = link.master.protocol
            assert protocol.state("broker") == "registered"
            record = peer.state.brokers["42"]
            assert record.topic_confs == [topic_conf_info("t", 3)]
            assert record.default_conf.startswith("3:true:true:")
            assert (record.conf_id, record.conf_checksum) == (1, link.conf_checksum)
            answer = await link.heartbeat()
            assert answer.success and not answer.needReportData
            assert protocol.state("broker") == "registered"
            assert record.heartbeats == 1
            # A new configuration goes along with the next heartbeat.
            link.set_topics({"t": 3, "u": 1})
            await link.heartbeat()
            assert record.conf_id == 2
            assert record.topic_confs == [topic_conf_info("t", 3), topic_conf_info("u", 1)]
            # A master that lost the broker fails its heartbeat; the broker registers again.
            del peer.state.brokers["42"]
            with pytest.raises(ServerError) as info:
                await link.heartbeat()
            assert info.value.err_code == NOT_REGISTERED
            assert link.registrations == 2
            assert protocol.state("broker") == "registered"
            assert peer.state.brokers["42"].conf_id == 2
            await link.close()
            closed = True
            assert "42" not in peer.state.brokers
            assert protocol.state("broker") == "closed"
        finally:
            if not closed:
                await link.close()

    run(scenario)


def test_master_asks_for_a_configuration_it_has_not_seen() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        conn = await TubeMQConnection.open(peer.master, timeout=5.0)
        try:
            calls = conn.requests
            bad = await calls.register_broker_to_master(reg_b2m(""))
            assert not bad.success and bad.errCode == BAD_REQUEST
            assert conn.protocol.state("broker") == "closed"  # a refused register ends it
            await conn.checked("REGISTER_B2M", calls.register_broker_to_master(reg_b2m("9")))
            beat = heart_b2m("9")
            beat.curBrokerConfId = 5
            answer = await conn.checked("HEARTBEAT_B2M", calls.broker_heartbeat_to_master(beat))
            assert answer.needReportData and answer.curBrokerConfId == 1
            beat.takeConfInfo = True
            beat.brokerTopicSetConfInfo = [topic_conf_info("x", 2)]
            answer = await conn.checked("HEARTBEAT_B2M", calls.broker_heartbeat_to_master(beat))
            assert not answer.needReportData and answer.curBrokerConfId == 5
            assert peer.state.brokers["9"].topic_confs == [topic_conf_info("x", 2)]
            done = await conn.checked("CLOSE_B2M", calls.close_broker_to_master(
                ms.CloseRequestB2M(brokerId="9")))
            assert done.success and peer.state.brokers == {}
        finally:
            conn.close()

    run(scenario)


def test_embedded_broker_registers_itself() -> None:
    async def main() -> None:
        peer = EmbeddedTubeMQ(broker_id=3, register_broker=True)
        await peer.start()
        try:
            assert set(peer.state.brokers) == {"3"}
            assert peer.broker_link is not None
            assert peer.broker_link.master.protocol.state("broker") == "registered"
            # Clients still work as before.
            producer = await Producer.create(peer.master, "t", heartbeat_interval=None,
                                             timeout=5.0)
            await producer.send(b"x")
            await producer.close()
        finally:
            await peer.stop()
        assert peer.state.brokers == {}

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))
