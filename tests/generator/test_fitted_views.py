"""The commands, machines, client and Spark modules come out of their views already fitted.

No whole-file pass runs over them (``build._fit`` is for the protobuf and frames modules only):
every line is fitted at the depth the template prints it, so running the line policy over the
finished module changes nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from protoframe.generator import build
from protoframe.generator.build import generate
from protoframe.generator.linefit import LIMIT, fit_source, mark_overlong
from tests.generator.spec_cases import GOOD_SPEC, MINI_PROTO
from tests.support.paths import DATA, ROOT

FAMILIES = ("commands", "client", "machines", "spark")


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
        assert mark_overlong(fit_source(text)) == text, rel


@pytest.mark.parametrize("family", FAMILIES)
def test_no_whole_file_pass_runs_over_them(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, family: str) -> None:
    passed: list[str] = []
    real = build._fit

    def spy(text: str) -> str:
        passed.append(text)
        return real(text)

    monkeypatch.setattr(build, "_fit", spy)
    shutil.copytree(ROOT / "specs" / "tubemq", tmp_path / "specs" / "tubemq")
    out = generate(tmp_path / "specs", "specs")
    text = out.files[f"tubemq/{family}.py"]
    assert passed and text not in passed


def test_long_names_are_fitted_in_the_spark_module_of_a_test_spec(tmp_path: Path) -> None:
    shutil.copytree(DATA / "nested", tmp_path / "specs" / "nested")
    text = generate(tmp_path / "specs", "specs", ["nested"],
                    outputs=frozenset({"spark"})).files["nested/spark.py"]
    assert mark_overlong(fit_source(text)) == text
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
        long = [line for line in text.split("\n") if len(line) > LIMIT
                and "# noqa: E501" not in line and '"""' not in line
                and not line.lstrip().startswith("#")]
        assert long == [], family
