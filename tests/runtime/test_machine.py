"""The state-machine engine (runtime/engine/machine.py) on a small hand-made machine: typed
states, keyed entities, guards, violations and final states."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from protoframe.runtime.engine import machine as engine
from protoframe.runtime.engine.machine import (
    NO_KEY,
    Direction,
    Interaction,
    MachineDef,
    MachineSet,
    ProtocolViolation,
    Rule,
    answering,
    hook_table,
    refuse,
)
from protoframe.runtime.errors import UnknownCommandError


class Job(enum.StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    DONE = "done"


def _key(command: str, body: Any) -> Any:
    return body["job"] if "job" in body else NO_KEY


JOB = MachineDef(
    name="job",
    initial=Job.IDLE,
    key_of=_key,
    rules=[
        Rule(Job.IDLE, Job.RUNNING, Direction.SEND, "START"),
        Rule(Job.RUNNING, Job.RUNNING, Direction.RECEIVE, "PROGRESS",
             guard=lambda body: body["percent"] < 100),
        Rule(Job.RUNNING, Job.DONE, Direction.RECEIVE, "PROGRESS",
             guard=lambda body: body["percent"] == 100),
        Rule(Job.RUNNING, Job.DONE, None, None, event="cancel"),
    ],
)


def machines() -> MachineSet:
    return MachineSet([JOB], [Interaction("START", frozenset({"PROGRESS"}), ("job",))],
                      lambda body, name: body[name])


def test_states_are_the_generated_enum_and_compare_as_text() -> None:
    m = machines()
    assert m.state("job", 1) is Job.IDLE
    m.sent("START", {"job": 1})
    assert m.state("job", 1) is Job.RUNNING and m.state("job", 1) == "running"
    assert m.state("job", 2) is Job.IDLE  # other entities are untouched


def test_guards_choose_the_transition() -> None:
    m = machines()
    m.sent("START", {"job": 1})
    m.received("PROGRESS", {"job": 1, "percent": 50})
    assert m.state("job", 1) is Job.RUNNING
    m.received("PROGRESS", {"job": 1, "percent": 100})
    assert m.state("job", 1) is Job.DONE


def test_a_command_in_the_wrong_state_is_a_violation_naming_the_state() -> None:
    m = machines()
    with pytest.raises(ProtocolViolation) as caught:
        m.received("PROGRESS", {"job": 7, "percent": 1})
    assert str(caught.value) == "job 7: cannot receive PROGRESS in state 'idle'"
    assert caught.value.state == "idle"


def test_final_state_stays_readable_and_the_id_can_start_over() -> None:
    m = machines()
    m.sent("START", {"job": 1})
    m.event("job", "cancel", 1)
    assert m.state("job", 1) is Job.DONE  # once read back as idle: the end was invisible
    assert 1 not in m.states["job"]  # but the live table forgets it
    m.sent("START", {"job": 1})  # the id is reused: it starts over from idle
    assert m.state("job", 1) is Job.RUNNING


def test_remembered_final_states_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "FINISHED_KEPT", 3)
    m = machines()
    for job in range(5):
        m.sent("START", {"job": job})
        m.event("job", "cancel", job)
    assert len(m.finished["job"]) == 3
    assert [m.state("job", j) for j in range(5)] == [Job.IDLE, Job.IDLE, Job.DONE, Job.DONE,
                                                     Job.DONE]


def test_events_on_an_ended_entity_start_from_the_initial_state() -> None:
    m = machines()
    m.sent("START", {"job": 1})
    m.event("job", "cancel", 1)
    with pytest.raises(ProtocolViolation, match="in state 'idle'"):
        m.event("job", "cancel", 1)


def test_answering_puts_correlated_requests_first() -> None:
    plain = Interaction("HELLO", frozenset({"OK", "FAIL"}), ())
    first = Interaction("GET", frozenset({"OK", "FAIL"}), ("id",))
    second = Interaction("PUT", frozenset({"DONE", "FAIL"}), ("id",))
    table = answering([plain, first, second])
    assert list(table) == ["DONE", "FAIL", "OK"]
    assert table["FAIL"] == (first, second, plain)
    assert table["OK"] == (first, plain)
    assert table["DONE"] == (second,)


def test_hook_table_holds_only_the_methods_an_object_defines() -> None:
    class Hooks:
        def __init__(self) -> None:
            self.got: list[tuple[str, object]] = []

        def on_start(self, body: object, frame: object) -> None:
            self.got.append(("start", body))

    hooks = Hooks()
    table = hook_table(hooks, {"START": "on_start", "STOP": "on_stop"})
    assert set(table) == {"START"}
    table["START"]({"job": 1}, None)
    assert hooks.got == [("start", {"job": 1})]
    assert hook_table(None, {"START": "on_start"}) == {}


@pytest.mark.parametrize("error", [
    ProtocolViolation("job", 1, "idle", "receive", "STOP"),
    UnknownCommandError("no command has the value 9"),
])
def test_refuse_raises_the_error_it_is_given(
        error: ProtocolViolation | UnknownCommandError) -> None:
    with pytest.raises(type(error)) as raised:
        refuse(error, object())
    assert raised.value is error


def _by_id(command: str, body: Any) -> Any:
    return body.get("id", NO_KEY)


def _deliveries() -> MachineSet:
    """DELIVER is answered by ACK; the client also sends ACKs of its own for what the server
    pushes, with ids from the server's range, which may equal one of its requests' ids."""
    delivery = MachineDef("delivery", "idle", [
        Rule("idle", "sent", Direction.SEND, "DELIVER"),
        Rule("sent", "acked", Direction.RECEIVE, "ACK"),
    ], _by_id)
    inbox = MachineDef("inbox", "idle", [
        Rule("idle", "held", Direction.RECEIVE, "PUSH"),
        Rule("held", "done", Direction.SEND, "ACK"),
    ], _by_id)
    return MachineSet([delivery, inbox], [Interaction("DELIVER", frozenset({"ACK"}), ("id",))],
                      lambda body, name: body[name])


def test_an_ack_we_send_never_answers_our_own_request_with_the_same_id() -> None:
    m = _deliveries()
    m.sent("DELIVER", {"id": 7})
    m.received("PUSH", {"id": 7})
    m.sent("ACK", {"id": 7})  # our ack of the push: goes to the inbox, answers nothing
    assert m.state("inbox", 7) == "done"
    assert m.state("delivery", 7) == "sent" and m.pending == 1
    m.received("ACK", {"id": 7})  # the server's answer to DELIVER
    assert m.state("delivery", 7) == "acked" and m.pending == 0


def test_on_the_server_side_the_answer_it_sends_completes_the_request_it_received() -> None:
    m = MachineSet(list(_deliveries().machines.values()),
                   [Interaction("DELIVER", frozenset({"ACK"}), ("id",))],
                   lambda body, name: body[name], server=True)
    m.received("DELIVER", {"id": 3})
    assert m.pending == 1
    m.sent("PUSH", {"id": 3})
    m.received("ACK", {"id": 3})  # the client acking a push: not an answer the server gave
    assert m.pending == 1 and m.state("delivery", 3) == "sent"
    m.sent("ACK", {"id": 3})
    assert m.pending == 0 and m.state("delivery", 3) == "acked"


def test_a_request_answered_by_its_own_name_is_not_answered_by_the_next_one_sent() -> None:
    ping = MachineDef("link", "up", [
        Rule("up", "up", Direction.SEND, "PING"),
        Rule("up", "up", Direction.RECEIVE, "PING"),
    ], None)
    m = MachineSet([ping], [Interaction("PING", frozenset({"PING"}), ())],
                   lambda body, name: body[name])
    m.sent("PING", {})
    m.sent("PING", {})  # once took the first one's place as its answer
    assert m.pending == 2
    m.received("PING", {})
    assert m.pending == 1


def test_a_request_its_fields_say_is_not_answered_leaves_nothing_pending() -> None:
    publish = MachineDef("link", "up", [
        Rule("up", "up", Direction.SEND, "PUBLISH"),
        Rule("up", "up", Direction.RECEIVE, "PUBACK"),
    ], None)
    answered = Interaction("PUBLISH", frozenset({"PUBACK"}), ("id",),
                           answered=lambda field: bool(field("qos") > 0))
    m = MachineSet([publish], [answered], lambda body, name: body[name])
    for i in range(1000):
        m.sent("PUBLISH", {"id": i % 7, "qos": 0})
    assert m.pending == 0  # once a thousand entries that no answer would ever clear
    m.sent("PUBLISH", {"id": 1, "qos": 1})
    assert m.pending == 1
    m.received("PUBACK", {"id": 1})
    assert m.pending == 0


def test_expects_answer_reads_the_request_through_field_of() -> None:
    read: list[str] = []

    def field_of(body: dict[str, int], name: str) -> int:
        read.append(name)
        return body[name]

    plain = Interaction("GET", frozenset({"VALUE"}), ())
    guarded = Interaction("PUBLISH", frozenset({"PUBACK"}), (),
                          answered=lambda field: bool(field("qos") == 1))
    assert plain.expects_answer({}, field_of) and read == []
    assert guarded.expects_answer({"qos": 1}, field_of)
    assert not guarded.expects_answer({"qos": 0}, field_of)
    assert read == ["qos", "qos"]


def test_every_machine_that_took_a_request_sees_its_answer() -> None:
    def link(name: str) -> MachineDef:
        return MachineDef(name, "idle", [
            Rule("idle", "greeting", Direction.SEND, "HELLO"),
            Rule("greeting", "ready", Direction.RECEIVE, "WELCOME"),
        ], None)

    session = MachineDef("session", "idle", [
        Rule("idle", "opening", Direction.SEND, "HELLO"),
        Rule("opening", "open", Direction.RECEIVE, "WELCOME"),
    ], lambda command, body: body.get("session", NO_KEY))
    m = MachineSet([link("connection"), link("audit"), session],
                   [Interaction("HELLO", frozenset({"WELCOME"}), ())],
                   lambda body, name: body[name])
    m.sent("HELLO", {"session": 5})
    m.received("WELCOME", {})  # carries no session: found through the request it answers
    # Once only the first machine to take HELLO saw WELCOME; the audit stayed in greeting.
    assert (m.state("connection"), m.state("audit"), m.state("session", 5)) == \
        ("ready", "ready", "open")
    assert m.pending == 0


def test_a_keyless_machine_sees_an_answer_it_has_a_transition_for_unless_a_keyed_one_does() \
        -> None:
    client = MachineDef("client", "idle", [
        Rule("idle", "asking", Direction.SEND, "ASK"),
        Rule("asking", "idle", Direction.RECEIVE, "REPLY"),
    ], None)
    counter = MachineDef("counter", "zero", [
        Rule("zero", "one", Direction.RECEIVE, "REPLY"),
    ], None)
    m = MachineSet([client, counter], [Interaction("ASK", frozenset({"REPLY"}), ())],
                   lambda body, name: body[name])
    m.sent("ASK", {})
    m.received("REPLY", {})
    assert (m.state("client"), m.state("counter")) == ("idle", "one")


def test_the_request_chooses_its_answer_and_another_answer_does_not_complete_it() -> None:
    link = MachineDef("link", "up", [
        Rule("up", "up", Direction.SEND, "SUBMIT"),
        Rule("up", "up", Direction.RECEIVE, "ACK"),
        Rule("up", "up", Direction.RECEIVE, "RECEIPT"),
    ], None)

    def choose(field: Any) -> frozenset[str]:
        chosen = {1: "ACK", 2: "RECEIPT"}.get(field("level"))
        return frozenset() if chosen is None else frozenset({chosen, "FAILED"})

    submit = Interaction("SUBMIT", frozenset({"ACK", "RECEIPT", "FAILED"}), ("id",),
                         choose=choose)
    m = MachineSet([link], [submit], lambda body, name: body[name])
    assert submit.expected({"level": 2}, lambda b, n: b[n]) == {"RECEIPT", "FAILED"}
    m.sent("SUBMIT", {"id": 1, "level": 2})
    m.sent("SUBMIT", {"id": 1, "level": 1})  # the same id again, answered another way
    m.sent("SUBMIT", {"id": 1, "level": 0})  # answered by nothing: nothing waits for it
    assert m.pending == 2
    m.received("ACK", {"id": 1})  # completes the level-1 request, though it is the newer
    assert [sorted(e) for e, _ in m._pending[("SUBMIT", (1,))]] == [["FAILED", "RECEIPT"]]
    m.received("RECEIPT", {"id": 1})
    assert m.pending == 0


def test_a_streamed_answer_keeps_its_request_pending_until_the_last_message() -> None:
    query = MachineDef("query", "idle", [
        Rule("idle", "asked", Direction.SEND, "QUERY"),
        Rule("asked", "rows", Direction.RECEIVE, "ROW"),
        Rule("rows", "rows", Direction.RECEIVE, "ROW"),
        Rule("asked", "done", Direction.RECEIVE, "COMPLETE"),
        Rule("rows", "done", Direction.RECEIVE, "COMPLETE"),
    ], lambda command, body: body.get("q", NO_KEY))
    m = MachineSet([query], [Interaction("QUERY", frozenset({"ROW", "COMPLETE"}), ("tag",),
                                         until=frozenset({"COMPLETE"}))],
                   lambda body, name: body[name])
    m.sent("QUERY", {"q": 1, "tag": 9})
    for _ in range(3):
        m.received("ROW", {"tag": 9})  # rows carry no key: found through the request
    assert m.state("query", 1) == "rows" and m.pending == 1
    m.received("COMPLETE", {"tag": 9})
    assert m.state("query", 1) == "done" and m.pending == 0
