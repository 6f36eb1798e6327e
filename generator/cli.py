"""The ``protoframe`` command: ``generate``, ``check``, ``init`` and ``diff``.

Settings come from ``[tool.protoframe]`` in the project's ``pyproject.toml`` (or a
``protoframe.toml``), found from the working directory upwards; flags override them (see
``protoframe.generator.config``).

Exit status: 0 on success, 1 when ``check`` finds stale files, 2 on bad input (every problem
printed as ``file:line:column: message``, nothing written), 3 when the generator produced a
module that does not compile (a protoframe bug; nothing written).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from protoframe.generator.api_summary import summarize
from protoframe.generator.build import discover_protocols, generate
from protoframe.generator.config import OUTPUTS, Overrides, Settings, load_settings
from protoframe.generator.diff import command as diff_command
from protoframe.generator.diff.docs_changes import changes_against_revision, changes_sections
from protoframe.generator.diff.settings import load_diff_settings
from protoframe.generator.docs_view import ChangesSection
from protoframe.generator.errors import GeneratorBug, SpecError, SpecErrors
from protoframe.generator.output import (
    OutputConflict,
    plan_docs,
    plan_files,
    write_plan,
)
from protoframe.generator.scaffold import scaffold

EXIT_OK, EXIT_STALE, EXIT_BAD_INPUT, EXIT_GENERATOR_BUG = 0, 1, 2, 3


def _version() -> str:
    from protoframe import __version__

    return __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="protoframe",
        description="Generate typed Python bindings from protocol specs (.proto files and a "
                    "YAML frame spec per protocol).",
    )
    parser.add_argument("--version", action="version", version=f"protoframe {_version()}")
    # The spelling before `protoframe check` existed, kept for scripts that use it.
    parser.add_argument("--check", dest="legacy_check", action="store_true",
                        help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    gen = sub.add_parser("generate", help="write the bindings (and docs) the specs describe")
    check = sub.add_parser("check", help="write nothing; exit 1 naming each stale file")
    for p in (gen, check):
        p.add_argument("--config", type=Path, default=None,
                       help="settings file (default: the nearest protoframe.toml, or "
                            "pyproject.toml with [tool.protoframe])")
        p.add_argument("--spec-dir", type=Path, default=None,
                       help="directory with one sub-directory per protocol (default: specs)")
        p.add_argument("--out", type=Path, default=None,
                       help="the generated package's directory (default: generated)")
        p.add_argument("--docs-out", type=Path, default=None,
                       help="write reference pages there (selects the docs output)")
        p.add_argument("--outputs", default=None,
                       help=f"comma-separated, of: {', '.join(OUTPUTS)} "
                            "(default: bindings,frames)")
        p.add_argument("--protocol", action="append", default=None,
                       help="only this protocol; may be repeated (default: all)")
        p.add_argument("--changes-against", metavar="REF", default=None,
                       help="reference pages gain a section of what `protoframe diff` finds "
                            "since git revision REF (setting: docs-changes-against)")
    gen.add_argument("--check", action="store_true", help="same as `protoframe check`")
    init = sub.add_parser("init", help="start a new protocol: a commented starter spec")
    init.add_argument("name", help="the protocol's name, a Python identifier (e.g. kv)")
    init.add_argument("--config", type=Path, default=None, help="settings file")
    init.add_argument("--spec-dir", type=Path, default=None,
                      help="where protocols live (default: the configured spec-dir, or specs)")
    diff_command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None and args.legacy_check:
        args = parser.parse_args(["check"])
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        if args.command == "init":
            return _init(args)
        if args.command == "diff":
            return diff_command.run(args)
        settings = load_settings(Path.cwd(), Overrides(
            config=args.config, spec_dir=args.spec_dir, out=args.out, docs_out=args.docs_out,
            outputs=[o.strip() for o in args.outputs.split(",") if o.strip()]
            if args.outputs is not None else None,
            protocols=args.protocol, docs_changes_against=args.changes_against))
        check = args.command == "check" or bool(getattr(args, "check", False))
        return _run(settings, check)
    except SpecErrors as exc:
        for error in exc.errors:
            print(f"error: {error}", file=sys.stderr)
        print(f"{len(exc.errors)} error(s); nothing was generated", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print("nothing was generated", file=sys.stderr)
        return EXIT_BAD_INPUT
    except GeneratorBug as exc:
        print(f"internal error: {exc}", file=sys.stderr)
        print("nothing was generated", file=sys.stderr)
        return EXIT_GENERATOR_BUG


def _run(settings: Settings, check: bool) -> int:
    started = time.perf_counter()
    protocols = list(settings.protocols) if settings.protocols else None
    output = generate(settings.spec_dir, settings.display(settings.spec_dir), protocols,
                      outputs=settings.outputs, changes=_changes(settings, protocols))
    for note in output.notes:
        print(f"note: {note}", file=sys.stderr)
    elapsed = time.perf_counter() - started
    try:
        plan = plan_files(settings.out, output.files, output.protocols, output.optional)
        if settings.docs_out is not None:
            plan += plan_docs(settings.docs_out, output.docs, output.protocols)
    except OutputConflict as exc:
        raise SpecErrors([SpecError(str(exc), settings.display(exc.path))]) from None
    if check:
        if plan:
            for change in plan:
                print(f"stale: {settings.display(change.path)}", file=sys.stderr)
            print("generated code is out of date: run `protoframe generate`", file=sys.stderr)
            return EXIT_STALE
        print(f"generated code is up to date ({len(output.files)} files)")
        return EXIT_OK
    api = summarize(plan, settings.display)  # before writing: it reads the old modules
    write_plan(plan)
    for change in plan:
        verb = "removed" if change.text is None else "wrote"
        print(f"{verb} {settings.display(change.path)}")
    for line in api:
        print(line)
    print(f"{len(plan)} file(s) changed, {len(output.files)} checked, "
          f"protocols: {', '.join(output.protocols)} ({elapsed:.2f} s)")
    return EXIT_OK


def _changes(settings: Settings,
             protocols: list[str] | None) -> dict[str, ChangesSection] | None:
    """The "changes" section of each reference page, when asked for (and pages are made)."""
    ref = settings.docs_changes_against
    if ref is None:
        return None
    if settings.docs_out is None:
        print(f"note: no reference pages are made (outputs without docs), so nothing shows "
              f"the changes since {ref}", file=sys.stderr)
        return None
    shown = settings.display(settings.spec_dir)
    changes = changes_against_revision(settings.spec_dir, shown, ref, protocols)
    names = protocols or discover_protocols(settings.spec_dir, shown)[0]
    return changes_sections(changes, ref, names, load_diff_settings(settings.source))


def _init(args: argparse.Namespace) -> int:
    settings = load_settings(Path.cwd(), Overrides(config=args.config, spec_dir=args.spec_dir))
    written = scaffold(settings.spec_dir, args.name)
    for path in written:
        print(f"wrote {settings.display(path)}")
    print(f"next: edit them, then run `protoframe generate` (the bindings go to "
          f"{settings.display(settings.out)}/{args.name}/)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
