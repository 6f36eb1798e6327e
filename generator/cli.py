"""Command line: ``python -m generator [--check] generate [options]``.

Exit status: 0 on success, 1 when ``--check`` finds stale files, 2 on bad input (every
problem printed as ``file:line:column: message``, nothing written).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from generator.build import generate
from generator.errors import SpecError, SpecErrors
from generator.output import stale_docs, stale_files, write_docs, write_files

EXIT_OK, EXIT_STALE, EXIT_BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m generator",
        description="Generate typed Python bindings from protocol specs.",
    )
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 naming each generated file that is stale")
    sub = parser.add_subparsers(dest="command")
    gen = sub.add_parser("generate", help="regenerate the bindings (the default command)")
    for p in (parser, gen):
        p.add_argument("--spec-dir", default=argparse.SUPPRESS,
                       help="directory with one sub-directory per protocol (default: specs)")
        p.add_argument("--out", default=argparse.SUPPRESS,
                       help="output directory (default: generated)")
        p.add_argument("--docs-out", default=argparse.SUPPRESS,
                       help="where protocol reference pages go (default: docs/protocols)")
        p.add_argument("--protocol", action="append", default=argparse.SUPPRESS,
                       help="only this protocol; may be repeated (default: all)")
    gen.add_argument("--check", action="store_true", default=argparse.SUPPRESS,
                     help="same as the top-level --check")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    spec_dir = Path(getattr(args, "spec_dir", "specs"))
    out_dir = Path(getattr(args, "out", "generated"))
    docs_dir = Path(getattr(args, "docs_out", "docs/protocols"))
    protocols: list[str] | None = getattr(args, "protocol", None)
    started = time.perf_counter()
    try:
        output = generate(spec_dir, spec_dir.as_posix().rstrip("/"), protocols)
    except SpecErrors as exc:
        for error in exc.errors:
            print(f"error: {error}", file=sys.stderr)
        print(f"{len(exc.errors)} error(s); nothing was generated", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    elapsed = time.perf_counter() - started
    if args.check:
        stale = [(out_dir / rel).as_posix()
                 for rel in stale_files(out_dir, output.files, output.protocols)]
        stale += [(docs_dir / rel).as_posix()
                  for rel in stale_docs(docs_dir, output.docs, output.protocols)]
        if stale:
            for path in stale:
                print(f"stale: {path}", file=sys.stderr)
            print("generated code is out of date: run `make generate` and commit the result",
                  file=sys.stderr)
            return EXIT_STALE
        print(f"generated code is up to date ({len(output.files)} files)")
        return EXIT_OK
    changed = [(out_dir / rel).as_posix()
               for rel in write_files(out_dir, output.files, output.protocols)]
    changed += [(docs_dir / rel).as_posix()
                for rel in write_docs(docs_dir, output.docs, output.protocols)]
    for path in changed:
        print(f"wrote {path}")
    print(f"{len(changed)} file(s) changed, {len(output.files)} checked, "
          f"protocols: {', '.join(output.protocols)} ({elapsed:.2f} s)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
