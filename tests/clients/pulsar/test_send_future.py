"""``SendFuture`` against ``asyncio.Future``: the same steps on each, the same outcomes.

No broker: a send op is finished by hand, as a receipt would finish it. Each scenario runs
once on a real asyncio future and once on a ``SendFuture``, recording what a caller can
observe (states, results, exceptions and their messages, callback order, what asyncio's
``gather``, ``wait``, ``wait_for``, ``shield``, ``as_completed`` and task cancellation do).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.producer.future import SendFuture, SendOp

# What a send resolves to on either kind: a real future gets this value as its result.
RESULT = MessageId(-1, 1, 2, -1)
Finish = Callable[[BaseException | None], None]


def make(kind: str) -> tuple[Any, Finish]:
    loop = asyncio.get_running_loop()
    if kind == "asyncio":
        future: asyncio.Future[MessageId] = loop.create_future()

        def finish_future(error: BaseException | None = None) -> None:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(RESULT)
        return future, finish_future
    op = SendOp(-1, loop, 0.0)

    def finish_op(error: BaseException | None = None) -> None:
        op.finish(1, 2, error)
    return SendFuture(op, -1), finish_op


def observe(call: Callable[[], object]) -> tuple[object, ...]:
    try:
        return ("returned", call())
    except BaseException as exc:  # noqa: BLE001 - the outcome is what is compared
        return ("raised", type(exc).__name__, exc.args)


def plain(value: object) -> object:
    """Exceptions as (type, args), which compare by value; lists item by item."""
    if isinstance(value, BaseException):
        return (type(value).__name__, value.args)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


async def settle(aw: Awaitable[object]) -> tuple[object, ...]:
    try:
        return ("returned", plain(await aw))
    except BaseException as exc:  # noqa: BLE001
        return ("raised", type(exc).__name__, exc.args)


async def pending_state(kind: str) -> list[object]:
    f, _ = make(kind)
    return [f.done(), f.cancelled(), observe(f.result)[:2], observe(f.exception)[:2]]


async def cancel_with_message(kind: str) -> list[object]:
    f, finish = make(kind)
    out = [f.cancel("why"), f.cancel(), f.done(), f.cancelled(), observe(f.result),
           observe(f.exception), await settle(f)]
    finish(None) if kind != "asyncio" else None  # a receipt after cancelling changes nothing
    return [*out, observe(f.result)]


async def callbacks(kind: str) -> list[object]:
    f, finish = make(kind)
    seen: list[object] = []
    f.add_done_callback(lambda x: seen.append(("first", x.result())))
    f.add_done_callback(lambda x: seen.append(("second", x.done())))
    finish(None)
    f.add_done_callback(lambda x: seen.append("after"))
    synchronous = list(seen)
    await asyncio.sleep(0)
    return [synchronous, seen]


async def failure(kind: str) -> list[object]:
    f, finish = make(kind)
    finish(ValueError("bad"))
    return [observe(f.result), repr(f.exception()), f.cancel(), await settle(f)]


async def remove_callbacks(kind: str) -> list[object]:
    f, _ = make(kind)

    def callback(x: object) -> None:
        pass
    f.add_done_callback(callback)
    f.add_done_callback(callback)
    return [f.remove_done_callback(callback), f.remove_done_callback(callback)]


async def cancel_runs_callbacks(kind: str) -> list[object]:
    f, _ = make(kind)
    seen: list[object] = []
    f.add_done_callback(lambda x: seen.append(x.cancelled()))
    f.cancel()
    before = list(seen)
    await asyncio.sleep(0)
    return [before, seen]


async def cancel_wakes_the_awaiting_task(kind: str) -> list[object]:
    f, _ = make(kind)
    task = asyncio.ensure_future(settle(f))
    await asyncio.sleep(0)
    f.cancel("stop")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return [task.done(), await task]


async def task_cancel_cancels_the_future(kind: str) -> list[object]:
    f, _ = make(kind)

    async def wait() -> object:
        return await f
    task = asyncio.ensure_future(wait())
    await asyncio.sleep(0)
    task.cancel("m")
    return [await settle(task), f.cancelled(), observe(f.result)]


async def wait_for_times_out(kind: str) -> list[object]:
    f, _ = make(kind)
    return [await settle(asyncio.wait_for(f, 0.01)), f.cancelled()]


async def gather_results(kind: str) -> list[object]:
    f, finish = make(kind)
    g, _ = make(kind)
    g.cancel("gone")
    asyncio.get_running_loop().call_soon(finish, None)
    return [await settle(asyncio.gather(f, g, return_exceptions=True)),
            await settle(asyncio.gather(g))]


async def gather_cancelled_later(kind: str) -> list[object]:
    f, _ = make(kind)
    asyncio.get_running_loop().call_soon(f.cancel, "later")
    return [await settle(asyncio.gather(f))]


async def asyncio_helpers(kind: str) -> list[object]:
    f, finish = make(kind)
    loop = asyncio.get_running_loop()
    loop.call_soon(finish, None)
    shielded = await settle(asyncio.shield(f))
    g, finish_g = make(kind)
    loop.call_soon(finish_g, None)
    completed = [await settle(c) for c in asyncio.as_completed([g])]
    h, finish_h = make(kind)
    k, _ = make(kind)
    loop.call_soon(finish_h, None)
    done, pending = await asyncio.wait([h, k], return_when=asyncio.FIRST_COMPLETED)
    k.cancel()
    return [asyncio.isfuture(f), asyncio.ensure_future(f) is f, f.get_loop() is loop, shielded,
            completed, (len(done), len(pending), h in done)]


SCENARIOS = [pending_state, cancel_with_message, callbacks, failure, remove_callbacks,
             cancel_runs_callbacks, cancel_wakes_the_awaiting_task,
             task_cancel_cancels_the_future, wait_for_times_out, gather_results,
             gather_cancelled_later, asyncio_helpers]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_send_future_behaves_as_an_asyncio_future(
        scenario: Callable[[str], Awaitable[list[object]]]) -> None:
    async def both() -> tuple[list[object], list[object]]:
        return await asyncio.wait_for(scenario("asyncio"), 5), \
            await asyncio.wait_for(scenario("send"), 5)
    expected, got = asyncio.run(both())
    assert got == expected


def test_the_comparison_sees_a_difference() -> None:
    async def differs() -> bool:
        f, _ = make("send")
        g, _ = make("asyncio")
        return observe(f.result) != observe(lambda: g.cancel() and g.result())
    assert asyncio.run(differs())
