"""The reference pages' "Changes since REF" section: only on request (``--changes-against`` or
``docs-changes-against``), listing what ``protoframe diff --against REF`` reports."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from protoframe.generator.cli import main
from protoframe.generator.scaffold import scaffold

GENERATE = ["generate", "--outputs", "bindings,frames,docs"]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
                   cwd=root, check=True, capture_output=True)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository of two commits of the starter protocol ``kv``: the second renames a
    field, adds one and widens a frame field."""
    monkeypatch.chdir(tmp_path)
    scaffold(tmp_path / "specs", "kv")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "kv v1")
    proto, spec = tmp_path / "specs/kv/kv.proto", tmp_path / "specs/kv/kv.yaml"
    _edit(proto, "repeated string tags = 2;", "repeated string labels = 2;\n  int32 count = 3;")
    _edit(spec, "{name: code, type: u16}", "{name: code, type: u32}")
    _git(tmp_path, "commit", "-qam", "kv v2")
    return tmp_path


def _page(capsys: pytest.CaptureFixture[str], docs: str, *args: str) -> str:
    assert main([*GENERATE, "--out", f"gen-{docs}", "--docs-out", docs, *args]) == 0
    capsys.readouterr()
    return Path(docs, "kv.md").read_text(encoding="utf-8")


EXPECTED = """\
<a id="changes"></a>
## Changes since HEAD~1

What `protoframe diff --against HEAD~1` reports for this protocol, by the rules and \
classification of [docs/diff.md](../diff.md): 1 wire-breaking, 1 source-breaking, \
0 compatible, 1 additive. Positions are `file:line:column` in the old and the new version \
(`-` where the element does not exist).
"""


def test_the_section_on_request(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = _page(capsys, "plain")
    page = _page(capsys, "with", "--changes-against", "HEAD~1")
    assert "Changes since" not in plain and 'id="changes"' not in plain
    before, _, section = page.partition('<a id="changes"></a>\n')
    # Everything else on the page is as without the section, bar its line in the contents.
    assert before.replace("- [Changes since HEAD~1](#changes)\n", "") == plain.rstrip("\n") \
        + "\n\n"
    assert ('<a id="changes"></a>\n' + section).startswith(EXPECTED)
    lines = section.splitlines()
    headings = [line for line in lines if line.startswith("### ")]
    assert headings == ["### wire-breaking", "### source-breaking", "### additive"]
    items = [line for line in lines if line.startswith("- ")]
    assert items == [
        "- `Failure.code`: field Failure.code: width: 2 -> 4 (`FRAME_FIELD_WIDTH_CHANGED`; wire "
        "breaking, source compatible; old `HEAD~1:specs/kv/kv.yaml:33:16`, new "
        "`specs/kv/kv.yaml:33:16`)",
        "- `kv.EchoRequest.labels`: field kv.EchoRequest 2 renamed from tags to labels "
        "(`FIELD_RENAMED`; wire compatible, source breaking; old "
        "`HEAD~1:specs/kv/kv.proto:11:3`, new `specs/kv/kv.proto:11:3`)",
        "- `kv.EchoRequest.count`: field kv.EchoRequest.count (3, optional int32) added "
        "(`FIELD_ADDED`; wire compatible, source compatible; old `-`, new "
        "`specs/kv/kv.proto:12:3`)",
    ]


def test_ignored_changes_are_counted_not_listed(project: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (project / "protoframe.toml").write_text('[diff]\nignore = ["FIELD_RENAMED"]\n',
                                             encoding="utf-8")
    page = _page(capsys, "docs", "--changes-against", "HEAD~1")
    assert "1 wire-breaking, 0 source-breaking, 0 compatible, 1 additive (1 ignored)." in page
    assert "### source-breaking" not in page and "labels" not in page.split("## Changes")[1]


def test_the_setting_asks_for_it_too(project: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    flagged = _page(capsys, "flag", "--changes-against", "HEAD~1")
    (project / "protoframe.toml").write_text('docs-changes-against = "HEAD~1"\n',
                                             encoding="utf-8")
    assert _page(capsys, "setting") == flagged
    assert _page(capsys, "again") == flagged  # deterministic


def test_nothing_changed(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = _page(capsys, "same", "--changes-against", "HEAD")
    assert "## Changes since HEAD\n" in page
    assert page.endswith("0 additive. Positions are `file:line:column` in the old and the new "
                         "version (`-` where the element does not exist).\n\nNothing changed "
                         "since `HEAD`.\n")


def test_check_compares_with_the_section(project: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--out", "gen", "--docs-out", "docs"]
    assert main([*GENERATE, *args]) == 0
    assert main(["check", "--outputs", "bindings,frames,docs", *args]) == 0
    assert main(["check", "--outputs", "bindings,frames,docs", *args,
                 "--changes-against", "HEAD~1"]) == 1
    assert "stale: docs/kv.md" in capsys.readouterr().err


def test_an_unknown_revision_is_bad_input(project: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*GENERATE, "--docs-out", "docs", "--changes-against", "no-such-ref"]) == 2
    err = capsys.readouterr().err
    assert "git archive" in err and not Path("docs").exists()


def test_the_setting_must_name_a_revision(project: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (project / "protoframe.toml").write_text("docs-changes-against = 3\n", encoding="utf-8")
    assert main([*GENERATE, "--docs-out", "docs"]) == 2
    assert ("protoframe.toml:1:1: 'docs-changes-against' must be a non-empty string (a git "
            "revision)") in capsys.readouterr().err


def test_without_pages_it_says_so(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "--out", "gen", "--changes-against", "HEAD~1"]) == 0
    assert "nothing shows the changes since HEAD~1" in capsys.readouterr().err
