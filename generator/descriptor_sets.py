"""The ``FileDescriptorSet`` a generated module carries for its .proto file (base64 pieces).

A Pulsar ProtobufNative schema registers the descriptors of the message's file and of every
file it imports; the generated module keeps them (``FILE_DESCRIPTOR_SET``, base64) so that
``clients.pulsar.schema.ProtobufNativeSchema`` needs nothing but the generated class. Source
info (comments, spans) is dropped: the registry does not read it, and it would change the
module whenever a comment changes.
"""

from __future__ import annotations

import base64

from google.protobuf import descriptor_pb2

__all__ = ["descriptor_set_lines", "file_descriptor_set"]

_CHUNK = 88  # base64 characters per line: with quotes and indentation, within 100 columns


def file_descriptor_set(name: str, descriptors: list[descriptor_pb2.FileDescriptorProto]
                        ) -> bytes:
    """The serialized set of file ``name`` and its imports, imports first (protoc's order)."""
    by_name = {fd.name: fd for fd in descriptors}
    if name not in by_name:
        raise KeyError(f"protoc returned no descriptor for {name}")
    wanted: list[str] = []

    def visit(file: str) -> None:
        if file in wanted:
            return
        for dep in by_name[file].dependency:
            if dep in by_name:
                visit(dep)
        wanted.append(file)

    visit(name)
    fds = descriptor_pb2.FileDescriptorSet()
    for file in wanted:
        copy = fds.file.add()
        copy.CopyFrom(by_name[file])
        copy.ClearField("source_code_info")
    return bytes(fds.SerializeToString(deterministic=True))


def descriptor_set_lines(path: str, descriptors: list[descriptor_pb2.FileDescriptorProto]
                         ) -> tuple[str, list[str]]:
    """The file's name as protoc knows it, and its set's base64 text cut into lines.

    ``path`` is the .proto file's path as the generator shows it ("specs/demo/events.proto");
    protoc names it relative to the protocol's folder ("events.proto").
    """
    names = [fd.name for fd in descriptors if path == fd.name or path.endswith("/" + fd.name)]
    if not names:
        raise KeyError(f"protoc returned no descriptor for {path}")
    name = max(names, key=len)
    text = base64.b64encode(file_descriptor_set(name, descriptors)).decode("ascii")
    return name, [text[i:i + _CHUNK] for i in range(0, len(text), _CHUNK)]
