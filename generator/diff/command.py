"""The ``protoframe diff`` subcommand (wired into ``protoframe.generator.cli``).

Exit status: 0 when nothing breaking (on the axes ``fail-on`` names, less ``ignore``) was
found, 1 when something was (or, with ``--lock``, when a lock file is stale or missing), 2 on
bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from protoframe.generator.config import Overrides, load_settings
from protoframe.generator.diff.compare import check_lock, compare_trees, updated_lock
from protoframe.generator.diff.docs_changes import changes_against_revision
from protoframe.generator.diff.lock import lock_path
from protoframe.generator.diff.report import json_report, text_report
from protoframe.generator.diff.rules import Change
from protoframe.generator.diff.settings import load_diff_settings
from protoframe.generator.diff.tree import load_tree
from protoframe.generator.errors import SpecError, SpecErrors

EXIT_OK, EXIT_BREAKING = 0, 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diff", help="what changed between two versions of the specs, and what it breaks",
        description="Compare two versions of the specs: OLD NEW (two spec directories), or "
                    "the working tree against a git revision (--against REF). --lock checks "
                    "the specs against each protocol's lock file; --update-lock writes it.")
    p.add_argument("old", nargs="?", type=Path, help="the old spec directory")
    p.add_argument("new", nargs="?", type=Path, help="the new spec directory")
    p.add_argument("--against", metavar="REF", default=None,
                   help="compare the configured spec directory with itself at git revision REF")
    p.add_argument("--lock", action="store_true",
                   help="check the specs against their lock files")
    p.add_argument("--update-lock", action="store_true",
                   help="add what the specs use to each protocol's lock file")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--config", type=Path, default=None, help="settings file")
    p.add_argument("--spec-dir", type=Path, default=None,
                   help="the specs (default: the configured spec-dir)")
    p.add_argument("--protocol", action="append", default=None,
                   help="only this protocol; may be repeated")


def run(args: argparse.Namespace) -> int:
    settings = load_settings(Path.cwd(), Overrides(config=args.config, spec_dir=args.spec_dir,
                                                   protocols=args.protocol))
    diff_settings = load_diff_settings(settings.source)
    protocols = list(settings.protocols) if settings.protocols else None
    modes = [args.old is not None, args.against is not None, args.lock, args.update_lock]
    if sum(modes) != 1 or (args.old is not None) != (args.new is not None):
        raise SpecErrors([SpecError("give OLD and NEW, or --against REF, or --lock, or "
                                    "--update-lock", "command line")])
    changes: list[Change]
    stale: list[str] = []
    if args.old is not None:
        old = load_tree(args.old, args.old.as_posix(), protocols)
        new = load_tree(args.new, args.new.as_posix(), protocols)
        changes = compare_trees(old, new)
    elif args.against is not None:
        changes = changes_against_revision(settings.spec_dir,
                                           settings.display(settings.spec_dir), args.against,
                                           protocols)
    else:
        tree = load_tree(settings.spec_dir, settings.display(settings.spec_dir), protocols)
        if args.update_lock:
            for name, snap in tree.items():
                path = lock_path(settings.spec_dir, name)
                text = updated_lock(snap).to_json()
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    path.write_text(text, encoding="utf-8")
                    print(f"wrote {settings.display(path)}")
            return EXIT_OK
        changes = []
        for name, snap in tree.items():
            found, is_stale = check_lock(snap)
            changes += found
            if is_stale:
                stale.append(settings.display(lock_path(settings.spec_dir, name)))
    report = json_report if args.format == "json" else text_report
    sys.stdout.write(report(changes, diff_settings))
    for shown in stale:
        print(f"stale lock file: {shown} (run `protoframe diff --update-lock` and commit it)",
              file=sys.stderr)
    failing = any(diff_settings.fails(c) for c in changes)
    return EXIT_BREAKING if failing or stale else EXIT_OK
