"""Wire versions: which ones we speak, and the overlap rule both sides apply to HELLO."""

from __future__ import annotations

from .errors import IncompatibleVersion

__all__ = ["HIGH_VERSION", "LOW_VERSION", "check_overlap"]

# The newest version whose fields our spec reads (the Java segment store's WIRE_VERSION), and
# the oldest one Pravega still accepts; older layouts differ only in optional trailing fields,
# which the generated decoders already read as absent.
HIGH_VERSION = 17
LOW_VERSION = 5


def check_overlap(ours: tuple[int, int], theirs: tuple[int, int]) -> None:
    """Raise ``IncompatibleVersion`` unless the ranges ``(low, high)`` share a version."""
    if max(ours[0], theirs[0]) > min(ours[1], theirs[1]):
        raise IncompatibleVersion(ours, theirs)
