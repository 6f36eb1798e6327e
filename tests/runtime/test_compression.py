"""Tests for runtime.codec.compression: round trips, wire-format facts, and hostile input."""

from __future__ import annotations

import random
import time
import tracemalloc
import zlib

import cramjam
import lz4.block
import pytest
import zstandard
from hypothesis import example, given, settings
from hypothesis import strategies as st

from protoframe.runtime.codec.compression import (
    CODECS,
    DEFAULT_MAX_SIZE,
    Codec,
    UnknownCodecError,
    compress,
    decompress,
    get_codec,
)
from protoframe.runtime.errors import DecodeError, DecompressionError, ProtoframeError

COMPRESSING = [c for c in CODECS if c != "NONE"]
SAMPLE = b"protoframe pulsar payload " * 200 + bytes(range(256))
ZSTD_MAGIC = bytes.fromhex("28b52ffd")
LZ4_FRAME_MAGIC = bytes.fromhex("04224d18")
SNAPPY_FRAMED_HEADER = b"\xff\x06\x00\x00sNaPpY"
SYNC_FLUSH_MARKER = bytes.fromhex("0000ffff")


def _random_bytes(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


# Hypothesis' own byte draws stay small, so large inputs come from a seeded PRNG
# (incompressible) and from repeated chunks (compressible, exercises back-references).
payloads = st.one_of(
    st.binary(max_size=2048),
    st.builds(_random_bytes, st.integers(0, 64 * 1024), st.integers(0, 2**32 - 1)),
    st.builds(
        lambda chunk, reps: (chunk * reps)[: 64 * 1024],
        st.binary(min_size=1, max_size=64),
        st.integers(0, 4096),
    ),
)


def _java_style_zlib(data: bytes) -> bytes:
    """What the Java client's CompressionCodecZLib writes: a sync flush and no trailer."""
    deflater = zlib.compressobj()
    return deflater.compress(data) + deflater.flush(zlib.Z_SYNC_FLUSH)


def _zeros_bomb(codec: str, size: int) -> bytes:
    return compress(codec, bytes(size))


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@settings(deadline=None)
@given(data=payloads)
@example(data=b"")
@example(data=b"\x00")
def test_round_trip(codec: str, data: bytes) -> None:
    packed = compress(codec, data)
    assert type(packed) is bytes
    unpacked = decompress(codec, packed, len(data))
    assert type(unpacked) is bytes
    assert unpacked == data


@pytest.mark.parametrize("codec", CODECS)
def test_codec_objects_match_module_functions(codec: str) -> None:
    obj: Codec = get_codec(codec)
    assert obj.name == codec
    packed = obj.compress(SAMPLE)
    assert packed == compress(codec, SAMPLE)
    assert obj.decompress(packed, len(SAMPLE)) == SAMPLE


def test_codecs_follow_pulsar_compression_type_order() -> None:
    assert CODECS == ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")


# --- wire-format facts shared with the Java / Go clients -----------------------------------


def test_lz4_is_a_raw_block_without_size_prefix() -> None:
    packed = compress("LZ4", SAMPLE)
    assert not packed.startswith(LZ4_FRAME_MAGIC)
    assert lz4.block.decompress(packed, uncompressed_size=len(SAMPLE)) == SAMPLE
    # A size-prefixed block would start with the little-endian length.
    assert not packed.startswith(len(SAMPLE).to_bytes(4, "little"))


def test_lz4_decodes_blocks_written_by_the_library() -> None:
    block = lz4.block.compress(SAMPLE, store_size=False)
    assert decompress("LZ4", block, len(SAMPLE)) == SAMPLE


def test_snappy_is_the_raw_block_format_not_framed() -> None:
    packed = compress("SNAPPY", SAMPLE)
    assert not packed.startswith(SNAPPY_FRAMED_HEADER)
    assert bytes(cramjam.snappy.decompress_raw(packed)) == SAMPLE
    with pytest.raises(cramjam.DecompressionError):
        cramjam.snappy.decompress(packed)  # the framed decoder must not accept it


def test_snappy_decodes_raw_blocks_written_by_the_library() -> None:
    block = bytes(cramjam.snappy.compress_raw(SAMPLE))
    assert decompress("SNAPPY", block, len(SAMPLE)) == SAMPLE


def test_zstd_is_a_plain_frame_with_content_size() -> None:
    packed = compress("ZSTD", SAMPLE)
    assert packed.startswith(ZSTD_MAGIC)
    assert zstandard.frame_content_size(packed) == len(SAMPLE)
    assert zstandard.ZstdDecompressor().decompress(packed) == SAMPLE


def test_zstd_accepts_frames_without_content_size() -> None:
    # Streaming encoders leave the content size out of the header.
    streaming = zstandard.ZstdCompressor().compressobj()
    packed = streaming.compress(SAMPLE) + streaming.flush()
    assert zstandard.frame_content_size(packed) == -1
    assert decompress("ZSTD", packed, len(SAMPLE)) == SAMPLE


def test_zlib_output_is_a_complete_zlib_stream() -> None:
    assert zlib.decompress(compress("ZLIB", SAMPLE)) == SAMPLE


@pytest.mark.parametrize("data", [b"", b"x", SAMPLE], ids=["empty", "one-byte", "sample"])
def test_zlib_accepts_java_style_sync_flushed_stream(data: bytes) -> None:
    stream = _java_style_zlib(data)
    assert stream.endswith(SYNC_FLUSH_MARKER)
    # This is why decompressobj is needed: the one-shot API wants the Adler-32 trailer.
    with pytest.raises(zlib.error, match="incomplete or truncated"):
        zlib.decompress(stream)
    assert decompress("ZLIB", stream, len(data)) == data


def test_zlib_accepts_complete_stream() -> None:
    assert decompress("ZLIB", zlib.compress(SAMPLE), len(SAMPLE)) == SAMPLE


def test_zlib_rejects_trailing_data_after_stream_end() -> None:
    with pytest.raises(DecompressionError, match="trailing"):
        decompress("ZLIB", zlib.compress(SAMPLE) + b"junk", len(SAMPLE))


# --- corrupt input -------------------------------------------------------------------------

CORRUPT = {
    "LZ4": b"\xff\xff\xff\xff\xff\xff",
    "ZLIB": b"this is not a zlib stream",
    "ZSTD": b"this is not a zstd frame",
    "SNAPPY": b"\x40\xff\xff\xff\xff",
}


def test_every_compressing_codec_has_a_corrupt_sample() -> None:
    assert sorted(CORRUPT) == sorted(COMPRESSING)


@pytest.mark.parametrize("codec", COMPRESSING)
def test_corrupt_input_raises_decompression_error(codec: str) -> None:
    with pytest.raises(DecompressionError, match=codec) as info:
        decompress(codec, CORRUPT[codec], 64)
    assert isinstance(info.value, DecodeError)
    assert info.value.__cause__ is not None  # the library's own error is kept


@pytest.mark.parametrize("codec", COMPRESSING)
def test_flipped_bytes_never_escape_as_library_errors(codec: str) -> None:
    packed = bytearray(compress(codec, SAMPLE))
    rng = random.Random(codec)
    for _ in range(200):
        damaged = bytearray(packed)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        try:
            out = decompress(codec, bytes(damaged), len(SAMPLE))
        except DecompressionError:
            continue
        assert len(out) == len(SAMPLE)  # some flips land in literals and still decode


@pytest.mark.parametrize("codec", COMPRESSING)
def test_truncated_input_raises_decompression_error(codec: str) -> None:
    packed = compress(codec, SAMPLE)
    with pytest.raises(DecompressionError):
        decompress(codec, packed[: len(packed) // 2], len(SAMPLE))


def test_empty_input_for_a_non_empty_claim_raises() -> None:
    for codec in CODECS:
        with pytest.raises(DecompressionError):
            decompress(codec, b"", 10)


# --- size claims from untrusted metadata ---------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_claim_larger_than_real_size_names_both_numbers(codec: str) -> None:
    packed = compress(codec, SAMPLE)
    claim = len(SAMPLE) + 1
    with pytest.raises(DecompressionError) as info:
        decompress(codec, packed, claim)
    message = str(info.value)
    assert codec in message
    assert str(claim) in message
    assert str(len(SAMPLE)) in message


@pytest.mark.parametrize("codec", CODECS)
def test_claim_smaller_than_real_size_raises(codec: str) -> None:
    packed = compress(codec, SAMPLE)
    claim = len(SAMPLE) - 1
    with pytest.raises(DecompressionError, match=str(claim)):
        decompress(codec, packed, claim)


@pytest.mark.parametrize("codec", ["NONE", "ZSTD", "SNAPPY"])
def test_claim_smaller_than_a_known_real_size_names_both_numbers(codec: str) -> None:
    # These formats (or no format) state the real size up front, so it can be reported.
    packed = compress(codec, SAMPLE)
    claim = len(SAMPLE) - 1
    with pytest.raises(DecompressionError) as info:
        decompress(codec, packed, claim)
    assert str(claim) in str(info.value)
    assert str(len(SAMPLE)) in str(info.value)


@pytest.mark.parametrize("codec", CODECS)
def test_negative_claim_is_refused(codec: str) -> None:
    with pytest.raises(DecompressionError, match="negative"):
        decompress(codec, compress(codec, b"abc"), -1)


@pytest.mark.parametrize("codec", CODECS)
def test_claim_over_max_size_is_refused_before_decoding(codec: str) -> None:
    # Garbage data proves the refusal happens before the decoder ever looks at it.
    with pytest.raises(DecompressionError, match="over the limit of 1000 bytes"):
        decompress(codec, b"\xde\xad\xbe\xef", 1001, max_size=1000)
    with pytest.raises(DecompressionError, match=str(DEFAULT_MAX_SIZE)):
        decompress(codec, b"\xde\xad\xbe\xef", DEFAULT_MAX_SIZE + 1)


@pytest.mark.parametrize("codec", CODECS)
def test_claim_equal_to_max_size_is_allowed(codec: str) -> None:
    data = SAMPLE[:1000]
    assert decompress(codec, compress(codec, data), 1000, max_size=1000) == data


def test_zlib_bomb_with_oversize_claim_fails_fast() -> None:
    bomb = _zeros_bomb("ZLIB", 10 * 1024 * 1024)
    assert len(bomb) < 20_000
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(DecompressionError, match="over the limit"):
            decompress("ZLIB", bomb, 10 * 1024 * 1024, max_size=1024 * 1024)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    assert elapsed < 0.05  # inflating the 10 MB would take longer than this


@pytest.mark.parametrize("codec", COMPRESSING)
def test_bomb_never_inflates_past_the_claim(codec: str) -> None:
    bomb = _zeros_bomb(codec, 10 * 1024 * 1024)
    claim = 1000
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionError, match=str(claim)):
            decompress(codec, bomb, claim, max_size=1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # tracemalloc sees Python-allocated buffers (zlib, lz4, zstandard outputs); the snappy
    # and zstd paths refuse on their headers before allocating at all.
    assert peak < 64 * 1024


def test_zstd_bomb_without_content_size_is_bounded_by_the_claim() -> None:
    streaming = zstandard.ZstdCompressor().compressobj()
    bomb = streaming.compress(bytes(10 * 1024 * 1024)) + streaming.flush()
    assert zstandard.frame_content_size(bomb) == -1
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionError, match="1000"):
            decompress("ZSTD", bomb, 1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_zstd_frame_demanding_a_huge_window_is_refused() -> None:
    # Without a content size, libzstd would allocate the window the header asks for. The
    # frame is patched rather than compressed with window_log=27, which costs 128 MiB.
    streaming = zstandard.ZstdCompressor().compressobj()
    frame = bytearray(streaming.compress(b"x" * 10) + streaming.flush())
    assert frame[4] == 0  # no content size, not single-segment: byte 5 is the window
    frame[5] = (27 - 10) << 3  # window descriptor: exponent 17, mantissa 0 -> 2**27
    assert zstandard.get_frame_parameters(bytes(frame)).window_size == 1 << 27
    with pytest.raises(DecompressionError, match="ZSTD"):
        decompress("ZSTD", bytes(frame), 10)
    frame[5] = (20 - 10) << 3  # the same frame with a 1 MiB window decodes fine
    assert decompress("ZSTD", bytes(frame), 10) == b"x" * 10


def test_snappy_preamble_lie_is_refused_before_allocating() -> None:
    # A 5-byte block whose preamble claims 4 GiB - 1; the decoder would allocate that much.
    lie = b"\xff\xff\xff\xff\x0f"
    assert cramjam.snappy.decompress_raw_len(lie) == 2**32 - 1
    with pytest.raises(DecompressionError, match="4294967295"):
        decompress("SNAPPY", lie, 100)


def test_zstd_rejects_trailing_data() -> None:
    with pytest.raises(DecompressionError, match="ZSTD"):
        decompress("ZSTD", compress("ZSTD", SAMPLE) + b"junk", len(SAMPLE))


# --- codec names ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["BROTLI", "lz4", "", "Zstd"])
def test_unknown_codec_raises_typed_error(name: str) -> None:
    for call in (
        lambda: get_codec(name),
        lambda: compress(name, b"x"),
        lambda: decompress(name, b"x", 1),
    ):
        with pytest.raises(UnknownCodecError, match="unknown compression codec") as info:
            call()
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, ProtoframeError)
        assert not isinstance(info.value, DecodeError)
        assert "SNAPPY" in str(info.value)


def test_none_accepts_an_unset_uncompressed_size() -> None:
    # Pulsar senders leave uncompressed_size unset on uncompressed payloads (it reads 0).
    assert decompress("NONE", b"hello", 0) == b"hello"
    with pytest.raises(DecompressionError):
        decompress("NONE", b"hello", 0, max_size=3)
    with pytest.raises(DecompressionError):
        decompress("NONE", b"hello", 4)
