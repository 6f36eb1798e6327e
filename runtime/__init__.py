"""Protocol-agnostic helpers that generated bindings and clients import.

Nothing here imports ``generated``: dependencies point from generated code to the runtime.
"""
