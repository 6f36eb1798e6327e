"""Protocol code: generated below this package by `protoframe generate`."""
