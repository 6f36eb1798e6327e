"""protoframe: typed Python bindings generated from protocol specs.

The distribution has one import root. Its parts:

- ``protoframe.generator``: specs -> validated model -> code (the ``protoframe`` command);
- ``protoframe.runtime``: what generated code imports (wire primitives, errors, state
  machines, request correlation, connections, Spark row conversion);
- ``protoframe.generated``: the bindings for the protocols shipped with protoframe
  (Pulsar, Pravega, TANK, TubeMQ and the demo's events);
- ``protoframe.clients``: hand-written clients and embedded peers on top of them;
- ``protoframe.pipeline``: Spark jobs and the ``format("pulsar")`` data source.
"""



def __getattr__(name: str) -> str:
    # importlib.metadata takes longer to import than the generated bindings themselves, so
    # the version is looked up only when something asks for it.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("protoframe")
        except PackageNotFoundError:  # a checkout on sys.path without an install
            found = "0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def import_root() -> str:
    """The directory that holds the ``protoframe`` package this process imported.

    A child process (a peer started by a test, a Spark worker) that gets it on its
    ``PYTHONPATH`` imports the same protoframe, whether that is an installed wheel or a
    checkout run in place.
    """
    from pathlib import Path

    return str(Path(__file__).resolve().parent.parent)
