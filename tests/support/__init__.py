"""Helpers shared by tests in several folders (generation into temporary packages, the official
protobuf runtime as a reference, value strategies, repository paths, Spark sessions)."""
