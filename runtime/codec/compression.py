"""Payload compression shared by protoframe codecs (Pulsar first, others later).

Codecs are named by upper-case strings equal to the names of Pulsar's ``CompressionType``
enum (``CODECS``) rather than by the generated enum itself, because ``runtime`` must never
import ``generated``.

The byte formats are not a free choice: they must match what the Java, Go and C++ Pulsar
clients write and read (pulsar-client-go's ``TestJavaCompatibility`` pins them down):

* ``LZ4`` is a raw LZ4 *block* with no size prefix and no frame header; the decoder learns
  the output size only from the message metadata.
* ``SNAPPY`` is the raw snappy block format (a varint length preamble, then the block), not
  the snappy framing format.
* ``ZSTD`` is one ordinary zstd frame, compressed at level 3 like the Java client.
* ``ZLIB`` is a zlib (RFC 1950) stream. The Java client ends its streams with a sync flush
  (``00 00 ff ff``) and never finishes them, so they carry no Adler-32 trailer and
  ``zlib.decompress()`` rejects them as truncated. Decompression therefore goes through
  ``zlib.decompressobj()``, which accepts those and complete streams alike. Compression
  writes complete streams, which Java's ``Inflater`` also accepts.

``uncompressed_size`` comes from untrusted metadata, so it is only a claim. It is checked
against ``max_size`` before anything is allocated, every decoder is bounded by it so a
decompression bomb cannot make us allocate more than the claim, and the real output length
must equal it exactly. All failures raise ``DecompressionError``.
"""

from __future__ import annotations

import threading
import zlib
from abc import ABC, abstractmethod
from typing import Final, Protocol

import cramjam
import lz4.block
import zstandard

from protoframe.runtime.errors import DecompressionError, ProtoframeError

__all__ = [
    "CODECS",
    "DEFAULT_MAX_SIZE",
    "Codec",
    "UnknownCodecError",
    "compress",
    "decompress",
    "get_codec",
]

# Pulsar's default maxMessageSize. Note the Java client bounds the *compressed* size by it,
# so a Java producer may legitimately send a larger uncompressed payload; callers that must
# accept those pass a larger max_size.
DEFAULT_MAX_SIZE: Final = 5 * 1024 * 1024

# Matches the Java client (ZSTD_COMPRESSION_LEVEL = 3), which is also zstd's default.
_ZSTD_LEVEL: Final = 3

# Frames that carry their content size are decoded in a single pass straight into the
# output buffer, but frames without it make libzstd allocate a window buffer as large as
# the header asks (up to 128 MiB by default) before producing a byte. 8 MiB is the window
# the zstd spec asks every decoder to support; Pulsar clients always write the content size.
_ZSTD_MAX_WINDOW: Final = 8 * 1024 * 1024


class UnknownCodecError(ProtoframeError, ValueError):
    """A compression codec name is not one of ``CODECS``."""


class Codec(Protocol):
    """One compression format."""

    @property
    def name(self) -> str: ...

    def compress(self, data: bytes) -> bytes: ...

    def decompress(
        self, data: bytes, uncompressed_size: int, *, max_size: int = DEFAULT_MAX_SIZE
    ) -> bytes:
        """Return exactly ``uncompressed_size`` bytes or raise ``DecompressionError``."""
        ...


def _size_mismatch(codec: str, declared: int, actual: int, what: str) -> DecompressionError:
    return DecompressionError(
        f"{codec}: metadata declares an uncompressed size of {declared} bytes "
        f"but {what} {actual} bytes"
    )


class _BaseCodec(ABC):
    name: str
    # Library exceptions that mean "the input is corrupt"; anything else is a bug and escapes.
    _errors: tuple[type[Exception], ...] = ()

    @abstractmethod
    def compress(self, data: bytes) -> bytes: ...

    @abstractmethod
    def _decompress(self, data: bytes, size: int) -> bytes:
        """Decode ``data``; must never allocate much more than ``size`` bytes of output."""

    def decompress(
        self, data: bytes, uncompressed_size: int, *, max_size: int = DEFAULT_MAX_SIZE
    ) -> bytes:
        if uncompressed_size < 0:
            raise DecompressionError(
                f"{self.name}: metadata declares a negative uncompressed size, {uncompressed_size}"
            )
        if uncompressed_size > max_size:
            raise DecompressionError(
                f"{self.name}: metadata declares an uncompressed size of {uncompressed_size} "
                f"bytes, over the limit of {max_size} bytes; refusing to decompress"
            )
        try:
            out = self._decompress(data, uncompressed_size)
        except self._errors as exc:
            raise DecompressionError(
                f"{self.name}: corrupt payload, or one that does not decompress to the "
                f"declared {uncompressed_size} bytes: {exc}"
            ) from exc
        if len(out) != uncompressed_size:
            raise _size_mismatch(self.name, uncompressed_size, len(out), "the payload holds")
        return out


class _NoneCodec(_BaseCodec):
    name = "NONE"

    def compress(self, data: bytes) -> bytes:
        return data

    def _decompress(self, data: bytes, size: int) -> bytes:
        return data

    def decompress(
        self, data: bytes, uncompressed_size: int, *, max_size: int = DEFAULT_MAX_SIZE
    ) -> bytes:
        # Senders leave uncompressed_size unset (it reads 0) on uncompressed payloads, and the
        # Java and Go clients ignore it for NONE; a size that is declared must still match.
        if uncompressed_size == 0 and data:
            if len(data) > max_size:
                raise DecompressionError(
                    f"NONE: payload of {len(data)} bytes is over the limit of {max_size} bytes")
            return data
        return super().decompress(data, uncompressed_size, max_size=max_size)


class _Lz4Codec(_BaseCodec):
    name = "LZ4"
    _errors = (lz4.block.LZ4BlockError,)

    def compress(self, data: bytes) -> bytes:
        out: bytes = lz4.block.compress(data, store_size=False)
        return out

    def _decompress(self, data: bytes, size: int) -> bytes:
        # The destination buffer is exactly `size` bytes, so a bomb fails instead of growing
        # it; a shorter result comes back short and fails the caller's length check.
        out: bytes = lz4.block.decompress(data, uncompressed_size=size)
        return out


class _ZlibCodec(_BaseCodec):
    name = "ZLIB"
    _errors = (zlib.error,)

    def compress(self, data: bytes) -> bytes:
        return zlib.compress(data)

    def _decompress(self, data: bytes, size: int) -> bytes:
        inflater = zlib.decompressobj()
        # One byte past the claim is enough to prove it false; max_length=0 would mean
        # "unbounded", which is another reason for the +1.
        out = inflater.decompress(data, size + 1)
        if len(out) > size:
            raise _size_mismatch(self.name, size, size, "the stream inflates to more than")
        if inflater.unused_data:
            raise DecompressionError(
                f"{self.name}: {len(inflater.unused_data)} bytes of trailing data after the "
                "end of the zlib stream"
            )
        # Not checking inflater.eof is deliberate: Java's sync-flushed streams never reach
        # it, and a stream truncated elsewhere comes up short of `size` and fails anyway.
        return out


class _ZstdState(threading.local):
    # Contexts are costly to build, so they are reused, but one must never be used by two
    # threads at once (the library releases the GIL while it works on them).
    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
        self.decompressor = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)


class _ZstdCodec(_BaseCodec):
    name = "ZSTD"
    _errors = (zstandard.ZstdError,)

    def __init__(self) -> None:
        self._state = _ZstdState()

    def compress(self, data: bytes) -> bytes:
        return self._state.compressor.compress(data)

    def _decompress(self, data: bytes, size: int) -> bytes:
        # zstandard ignores max_output_size when the frame header carries a content size and
        # allocates whatever the header says, so the header is checked against the claim first.
        content_size = zstandard.frame_content_size(data)
        if content_size >= 0 and content_size != size:
            raise _size_mismatch(self.name, size, content_size, "the zstd frame header declares")
        # max_output_size=0 means "no limit", hence `or 1` for an empty payload.
        return self._state.decompressor.decompress(
            data, max_output_size=size or 1, allow_extra_data=False
        )


class _SnappyCodec(_BaseCodec):
    name = "SNAPPY"
    _errors = (cramjam.DecompressionError,)

    def compress(self, data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    def _decompress(self, data: bytes, size: int) -> bytes:
        # decompress_raw sizes its output from the block's length preamble alone (it has no
        # way to cap it), so the preamble is checked against the claim first.
        preamble: int = cramjam.snappy.decompress_raw_len(data)
        if preamble != size:
            raise _size_mismatch(self.name, size, preamble, "the snappy preamble declares")
        return bytes(cramjam.snappy.decompress_raw(data))


_REGISTRY: Final[dict[str, Codec]] = {
    codec.name: codec
    for codec in (_NoneCodec(), _Lz4Codec(), _ZlibCodec(), _ZstdCodec(), _SnappyCodec())
}

# In Pulsar CompressionType order (NONE = 0 ... SNAPPY = 4).
CODECS: Final[tuple[str, ...]] = tuple(_REGISTRY)


def get_codec(name: str) -> Codec:
    """Return the codec called ``name`` (exact, upper-case), or raise ``UnknownCodecError``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownCodecError(
            f"unknown compression codec {name!r}; expected one of {', '.join(CODECS)}"
        ) from None


def compress(codec: str, data: bytes) -> bytes:
    """Compress ``data`` in the wire format the other Pulsar clients use for ``codec``."""
    return get_codec(codec).compress(data)


def decompress(
    codec: str, data: bytes, uncompressed_size: int, *, max_size: int = DEFAULT_MAX_SIZE
) -> bytes:
    """Decompress ``data``, which metadata says inflates to ``uncompressed_size`` bytes.

    Raises ``DecompressionError`` if the claim is negative or over ``max_size`` (before any
    decoding), if ``data`` is corrupt, or if it does not inflate to exactly the claim; raises
    ``UnknownCodecError`` for an unknown ``codec``.
    """
    return get_codec(codec).decompress(data, uncompressed_size, max_size=max_size)
