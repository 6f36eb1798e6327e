"""The rows of ``bench protobuf`` for what PulsarApi.proto hardly has: a map (Pravega's
``StreamCut``), a oneof (Pulsar's ``CommandWatchScalableTopicsUpdate``) and proto3 implicit
presence (the demo's ``OrderPlaced``), ours beside upb on the same values.

betterproto has no column here: its module is generated for PulsarApi.proto only.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.bench_protobuf import Case, Codec
from protoframe.generated.demo import events
from protoframe.generated.pravega import controller
from protoframe.generated.pulsar import pulsar_api

SPEC_DIR = Path(__file__).resolve().parent.parent / "specs"

WATCH_ID = 42
ADDED = ("persistent://public/default/orders-7", "persistent://public/default/orders-8")
REMOVED = ("persistent://public/default/orders-3",)
SCOPE, STREAM = "examples", "orders"
# segment id (epoch in the high 32 bits) -> offset
CUT = ((0, 1_048_576), (1, 2_097_152), (2 << 32 | 2, 524_288), (2 << 32 | 3, 65_536))
ORDER_ID, CUSTOMER, AMOUNT_CENTS, CURRENCY = "o-000042", "c-1337", 12_999, "EUR"
ITEMS = ("sku-1001", "sku-2002", "sku-3003")
PLACED_AT_MS = 1_700_000_000_000

CASES = (
    Case("oneof", "WatchScalableTopicsUpdate (oneof)", (WATCH_ID, "diff", ADDED, REMOVED)),
    Case("map", "StreamCut (map, 4 entries)", (SCOPE, STREAM, dict(CUT))),
    Case("proto3", "OrderPlaced (proto3)",
         (ORDER_ID, CUSTOMER, AMOUNT_CENTS, CURRENCY, ITEMS, PLACED_AT_MS)),
)
# Cases whose bytes may differ between ours and upb: upb writes a map's entries in its own
# order, ours in the dict's; both must still read the expected values from ours.
ANY_ORDER = frozenset({"map"})


def ours_codecs() -> dict[str, Codec]:
    Update = pulsar_api.CommandWatchScalableTopicsUpdate
    Diff = pulsar_api.ScalableTopicsDiff
    StreamCut = controller.StreamCut
    StreamInfo = controller.StreamInfo
    OrderPlaced = events.OrderPlaced

    def oneof_build() -> bytes:
        return Update(watch_id=WATCH_ID,
                      diff=Diff(added=list(ADDED), removed=list(REMOVED))).encode()

    def oneof_read(data: bytes) -> tuple[Any, ...]:
        msg = Update.decode(data)
        diff = msg.diff
        assert diff is not None
        return (msg.watch_id, msg.which_event(), tuple(diff.added), tuple(diff.removed))

    def map_build() -> bytes:
        return StreamCut(streamInfo=StreamInfo(scope=SCOPE, stream=STREAM),
                         cut=dict(CUT)).encode()

    def map_read(data: bytes) -> tuple[Any, ...]:
        msg = StreamCut.decode(data)
        info = msg.streamInfo
        assert info is not None
        return (info.scope, info.stream, dict(msg.cut))

    def proto3_build() -> bytes:
        return OrderPlaced(order_id=ORDER_ID, customer=CUSTOMER, amount_cents=AMOUNT_CENTS,
                           currency=CURRENCY, items=list(ITEMS),
                           placed_at_ms=PLACED_AT_MS).encode()

    def proto3_read(data: bytes) -> tuple[Any, ...]:
        msg = OrderPlaced.decode(data)
        return (msg.order_id, msg.customer, msg.amount_cents, msg.currency, tuple(msg.items),
                msg.placed_at_ms)

    return {"oneof": Codec(oneof_build, oneof_read), "map": Codec(map_build, map_read),
            "proto3": Codec(proto3_build, proto3_read)}


def upb_codecs(pulsar_pb: Any, tmp: Path) -> dict[str, Codec]:
    controller_pb = _upb_module(tmp, "pravega", "controller")
    events_pb = _upb_module(tmp, "demo", "events")
    Update = pulsar_pb.CommandWatchScalableTopicsUpdate
    Diff = pulsar_pb.ScalableTopicsDiff
    StreamCut = controller_pb.StreamCut
    StreamInfo = controller_pb.StreamInfo
    OrderPlaced = events_pb.OrderPlaced

    def oneof_build() -> bytes:
        data: bytes = Update(watch_id=WATCH_ID,
                             diff=Diff(added=ADDED, removed=REMOVED)).SerializeToString()
        return data

    def oneof_read(data: bytes) -> tuple[Any, ...]:
        msg = Update.FromString(data)
        diff = msg.diff
        return (msg.watch_id, msg.WhichOneof("event"), tuple(diff.added), tuple(diff.removed))

    def map_build() -> bytes:
        data: bytes = StreamCut(streamInfo=StreamInfo(scope=SCOPE, stream=STREAM),
                                cut=dict(CUT)).SerializeToString()
        return data

    def map_read(data: bytes) -> tuple[Any, ...]:
        msg = StreamCut.FromString(data)
        info = msg.streamInfo
        return (info.scope, info.stream, dict(msg.cut))

    def proto3_build() -> bytes:
        data: bytes = OrderPlaced(order_id=ORDER_ID, customer=CUSTOMER,
                                  amount_cents=AMOUNT_CENTS, currency=CURRENCY, items=ITEMS,
                                  placed_at_ms=PLACED_AT_MS).SerializeToString()
        return data

    def proto3_read(data: bytes) -> tuple[Any, ...]:
        msg = OrderPlaced.FromString(data)
        return (msg.order_id, msg.customer, msg.amount_cents, msg.currency, tuple(msg.items),
                msg.placed_at_ms)

    return {"oneof": Codec(oneof_build, oneof_read), "map": Codec(map_build, map_read),
            "proto3": Codec(proto3_build, proto3_read)}


def _upb_module(tmp: Path, protocol: str, name: str) -> ModuleType:
    """protoc's Python module for ``specs/<protocol>/<name>.proto``, in ``tmp``."""
    out = tmp / f"pb2_{protocol}"
    out.mkdir(exist_ok=True)
    proto = SPEC_DIR / protocol / f"{name}.proto"
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto.parent}",
           f"--python_out={out}", str(proto)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"protoc failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}{done.stderr}")
    module_name = f"_protoframe_bench_{protocol}_{name}_pb2"
    spec = importlib.util.spec_from_file_location(module_name, out / f"{name}_pb2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
