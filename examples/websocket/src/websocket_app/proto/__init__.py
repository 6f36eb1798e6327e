"""Protocol bindings: generated below this package by `protoframe generate`."""
