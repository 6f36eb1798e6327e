"""Must fail mypy: a hook taking another command's body."""

from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Frame
from protoframe.generated.pulsar.machines import PulsarHooks, PulsarProtocol


class Hooks(PulsarHooks):
    def on_send_receipt(self, body: pb.CommandSendError, frame: Frame) -> None:
        print(body.message)


PulsarProtocol(hooks=Hooks())
