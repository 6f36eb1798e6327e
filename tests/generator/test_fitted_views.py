"""Every generated module (protobuf, frames, commands, machines, client, Spark) comes out of
its view fitted.

No whole-file pass runs over them: every line is fitted at the depth the template prints it,
so running the line policy over the finished module changes nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from protoframe.generator.build import generate
from protoframe.generator.linefit import LIMIT, fit_marked
from tests.generator.spec_cases import GOOD_SPEC, MINI_PROTO
from tests.generator.test_spec_fuzz import sample_specs
from tests.support.paths import DATA, ROOT

FAMILIES = ("frames", "commands", "client", "machines", "spark")
# What the protobuf modules are not: each of those is named after its .proto file.
NOT_PROTOBUF = (*FAMILIES, "__init__")


def line_policy(text: str) -> str:
    """``text`` with the line policy applied to each code line, as a whole-file pass would:
    docstrings and lines already marked as beyond it are left as they are."""
    out: list[str] = []
    in_doc = False
    for line in text.split("\n"):
        quotes = line.count('"""')
        out += [line] if in_doc or quotes or "# noqa: E501" in line else fit_marked(line)
        if quotes % 2 == 1:
            in_doc = not in_doc
    return "\n".join(out)


def unmarked_long_lines(text: str) -> list[str]:
    """Code lines over the limit and not marked so (docstrings are left whole, by design)."""
    out: list[str] = []
    in_doc = False
    for line in text.split("\n"):
        quotes = line.count('"""')
        if (not in_doc and not quotes and len(line) > LIMIT and "# noqa: E501" not in line
                and not line.lstrip().startswith("#")):
            out.append(line)
        if quotes % 2 == 1:
            in_doc = not in_doc
    return out


def protobuf_modules(files: dict[str, str]) -> dict[str, str]:
    return {rel: text for rel, text in files.items() if rel.endswith(".py")
            and rel.count("/") == 1 and rel.rsplit("/", 1)[1][:-3] not in NOT_PROTOBUF}


@pytest.fixture(scope="module")
def repo_modules() -> dict[str, str]:
    return {rel: text for rel, text in generate(ROOT / "specs", "specs").files.items()
            if rel.endswith(".py")}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_line_policy_changes_nothing_in_the_repository_modules(
        repo_modules: dict[str, str], family: str) -> None:
    chosen = {rel: text for rel, text in repo_modules.items() if rel.endswith(f"/{family}.py")}
    assert len(chosen) >= 4
    for rel, text in chosen.items():
        assert line_policy(text) == text, rel


def test_the_line_policy_changes_nothing_in_the_repository_protobuf_modules(
        repo_modules: dict[str, str]) -> None:
    chosen = protobuf_modules(repo_modules)
    assert len(chosen) >= 6 and "pulsar/pulsar_api.py" in chosen
    # The fitting this checks is there: pulsar_api.py has long lines broken and marked.
    assert "# noqa: E501" in chosen["pulsar/pulsar_api.py"]
    for rel, text in chosen.items():
        assert line_policy(text) == text, rel


def test_long_names_are_fitted_in_the_spark_module_of_a_test_spec(tmp_path: Path) -> None:
    shutil.copytree(DATA / "nested", tmp_path / "specs" / "nested")
    text = generate(tmp_path / "specs", "specs", ["nested"],
                    outputs=frozenset({"spark"})).files["nested/spark.py"]
    assert line_policy(text) == text
    assert max(len(line) for line in text.split("\n") if '"""' not in line) <= LIMIT


LONG_FRAME = "FrameOfAProtocolWhoseAuthorsLikedLongNamesVeryMuchIndeedSoMuch"


def test_long_names_in_template_lines_are_fitted_by_the_views(tmp_path: Path) -> None:
    # The skeleton's own lines (signatures naming the frame class, the hooks) are long here.
    spec = (GOOD_SPEC.replace("name: Frame", f"name: {LONG_FRAME}")
            .replace("protocol: mini", "protocol: a_protocol_whose_authors_liked_long_names"))
    spec_dir = tmp_path / "specs" / "mini"
    spec_dir.mkdir(parents=True)
    (spec_dir / "mini.proto").write_text(MINI_PROTO)
    (spec_dir / "mini.yaml").write_text(spec)
    out = generate(tmp_path / "specs", "specs")
    for family in FAMILIES:
        text = out.files[f"mini/{family}.py"]
        assert LONG_FRAME in text or family == "commands"  # an envelope's names no frame
        assert unmarked_long_lines(text) == [], family


LONG_MESSAGE = "AMessageOfAProtocolWhoseAuthorsLikedLongNamesVeryMuchIndeed"
LONG_PROTO = f"""\
syntax = "proto2";
package a.protocol.whose.authors.liked.long.names.very.much.indeed;

message {LONG_MESSAGE} {{
  enum {LONG_MESSAGE}Kind {{ THE_FIRST_KIND_OF_A_PROTOCOL_WHOSE_AUTHORS_LIKED_LONG_NAMES = 1; }}
  message {LONG_MESSAGE}Nested {{
    message {LONG_MESSAGE}Deeper {{
      optional {LONG_MESSAGE}Kind a_field_whose_name_is_long_enough_to_matter = 1
          [default = THE_FIRST_KIND_OF_A_PROTOCOL_WHOSE_AUTHORS_LIKED_LONG_NAMES];
      repeated {LONG_MESSAGE}Deeper the_deeper_children_of_this_deeper_message = 2;
    }}
    optional {LONG_MESSAGE}Deeper the_deeper_message_of_this_nested_message = 1;
    oneof a_oneof_whose_name_is_long_enough {{
      string a_oneof_member_whose_name_is_long_enough_to_matter = 2;
      {LONG_MESSAGE}Deeper another_oneof_member_whose_name_is_long = 3;
    }}
  }}
  required {LONG_MESSAGE}Nested the_nested_message_of_this_long_named_message = 1;
  map<string, {LONG_MESSAGE}Nested> a_map_from_long_names_to_nested_messages = 2;
  optional {LONG_MESSAGE}Kind the_kind_of_this_long_named_message_as_an_enum = 3;
}}
"""


def test_long_names_in_a_protobuf_module_are_fitted_by_the_views(tmp_path: Path) -> None:
    spec_dir = tmp_path / "specs" / "longproto"
    spec_dir.mkdir(parents=True)
    (spec_dir / "long.proto").write_text(LONG_PROTO)
    text = generate(tmp_path / "specs", "specs", outputs=frozenset({"bindings"})).files[
        "longproto/long.py"]
    assert f"class {LONG_MESSAGE}Deeper(Message):" in text
    assert unmarked_long_lines(text) == []
    assert line_policy(text) == text
    assert max(len(line) for line in text.split("\n")) > LIMIT  # the names are long enough


def test_random_specs_with_long_names_give_fitted_frames_modules(tmp_path: Path) -> None:
    # The fuzzing strategy's specs: long struct and frame names, fields named like locals.
    specs = sample_specs(6)
    assert any("AVeryLongStructNameForFuzzingTheWrapper" in spec for spec in specs)
    for index, spec in enumerate(specs):
        spec_dir = tmp_path / f"s{index}" / "fz"
        spec_dir.mkdir(parents=True)
        (spec_dir / "fz.yaml").write_text(spec)
        text = generate(spec_dir.parent, "specs").files["fz/frames.py"]
        assert unmarked_long_lines(text) == [], spec
        assert line_policy(text) == text, spec
