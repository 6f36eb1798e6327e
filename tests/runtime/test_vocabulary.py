"""The layout tables' vocabulary and the frame tables' row limit are defined once
(runtime/codec/vocabulary.py): the C header is written from it, and a C module built from
another numbering or limit is refused at import."""

from __future__ import annotations

from pathlib import Path

import pytest

from protoframe.runtime.codec import compiled, compiled_frames, vocabulary

ROOT = Path(__file__).resolve().parents[2]


def test_the_c_header_is_the_one_the_vocabulary_writes() -> None:
    assert (ROOT / vocabulary.HEADER_PATH).read_text(encoding="utf-8") == vocabulary.c_header()


def test_the_header_check_catches_a_stale_header(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    header = tmp_path / "_vocabulary.h"
    header.write_text(vocabulary.c_header(), encoding="utf-8")
    assert vocabulary.main(["--check", str(header)]) == 0
    header.write_text(vocabulary.c_header().replace("K_OPEN_ENUM = 18", "K_OPEN_ENUM = 19"),
                      encoding="utf-8")
    assert vocabulary.main(["--check", str(header)]) == 1
    assert "is stale" in capsys.readouterr().err


def test_the_header_numbers_every_word_as_the_python_side_does() -> None:
    header = vocabulary.c_header()
    for words in vocabulary.NUMBERS.values():
        for name, number in words.items():
            assert f'", "{name}", ' in header
            assert f"_{name.upper()} = {number}," in header


def test_the_header_gives_the_c_codec_the_row_limit() -> None:
    header = vocabulary.c_header()
    assert f"#define FRAME_MAX_ROWS {vocabulary.FRAME_MAX_ROWS}\n" in header
    # The frame codec takes its limit from the header only.
    source = (ROOT / "runtime/codec/_framecodec.c").read_text(encoding="utf-8")
    assert "#define FRAME_MAX_ROWS" not in source and "FRAME_MAX_ROWS" in source


def test_the_codecs_read_the_one_vocabulary() -> None:
    assert compiled.KINDS is vocabulary.KINDS
    assert compiled.MODES is vocabulary.MODES
    assert compiled_frames._OPS is vocabulary.OPS
    assert set(compiled_frames._PRESENCE.values()) | {compiled_frames._PEEK} \
        == set(vocabulary.PRESENCE.values())


@pytest.mark.skipif(compiled._wirecodec is None, reason="the C extension is not built")
def test_the_built_modules_number_the_words_as_the_vocabulary_does() -> None:
    from protoframe.runtime.codec import _columnar, _framecodec, _wirecodec

    for module in (_wirecodec, _framecodec, _columnar):
        assert module.VOCABULARY == {k: dict(v) for k, v in vocabulary.NUMBERS.items()}
        vocabulary.check_built(module.__name__, module.VOCABULARY, tuple(vocabulary.NUMBERS))


@pytest.mark.skipif(compiled_frames._framecodec is None, reason="the C extension is not built")
def test_the_built_frame_codec_has_the_row_limit_of_the_vocabulary() -> None:
    from protoframe.runtime.codec import _framecodec

    assert _framecodec.MAX_ROWS == vocabulary.FRAME_MAX_ROWS


def test_a_module_built_with_another_row_limit_is_refused() -> None:
    vocabulary.check_built_limit("m", "MAX_ROWS", 64, 64)
    with pytest.raises(ImportError, match="m was compiled with MAX_ROWS = 32 where "):
        vocabulary.check_built_limit("m", "MAX_ROWS", 32, 64)
    with pytest.raises(ImportError, match="m exports no MAX_ROWS"):
        vocabulary.check_built_limit("m", "MAX_ROWS", None, 64)


def test_a_module_built_from_another_numbering_is_refused() -> None:
    built = {k: dict(v) for k, v in vocabulary.NUMBERS.items()}
    built["FIELD_KINDS"]["message"], built["FIELD_KINDS"]["bytes"] = (
        built["FIELD_KINDS"]["bytes"], built["FIELD_KINDS"]["message"])
    vocabulary.check_built("m", built, ("FIELD_MODES", "FRAME_OPS"))
    with pytest.raises(ImportError, match="m was compiled with another FIELD_KINDS"):
        vocabulary.check_built("m", built, ("FIELD_KINDS",))
    del built["FRAME_OPS"]["struct"]
    with pytest.raises(ImportError, match="another FRAME_OPS"):
        vocabulary.check_built("m", built, ("FRAME_OPS",))
    with pytest.raises(ImportError, match="exports no VOCABULARY"):
        vocabulary.check_built("m", None, ("FRAME_OPS",))


@pytest.mark.skipif(compiled._wirecodec is None, reason="the C extension is not built")
@pytest.mark.parametrize("module", ["compiled", "compiled_frames"])
def test_importing_the_codecs_refuses_a_mismatched_build(module: str) -> None:
    import subprocess
    import sys

    export = "FIELD_KINDS" if module == "compiled" else "FRAME_OPS"
    # The extension stays as built; the Python side is made to expect another numbering.
    script = (
        "from types import MappingProxyType\n"
        "from protoframe.runtime.codec import vocabulary as v\n"
        "numbers = {k: dict(w) for k, w in v.NUMBERS.items()}\n"
        f"numbers[{export!r}] = {{n: i + 40 for n, i in numbers[{export!r}].items()}}\n"
        "v.NUMBERS = MappingProxyType(numbers)\n"
        f"import protoframe.runtime.codec.{module}\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode != 0
    assert f"was compiled with another {export}" in result.stderr


@pytest.mark.skipif(compiled_frames._framecodec is None, reason="the C extension is not built")
def test_importing_the_frame_codec_refuses_another_row_limit() -> None:
    import subprocess
    import sys

    # The extension stays as built; the Python side is made to expect another limit.
    script = ("from protoframe.runtime.codec import vocabulary as v\n"
              "v.FRAME_MAX_ROWS = v.FRAME_MAX_ROWS // 2\n"
              "import protoframe.runtime.codec.compiled_frames\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode != 0
    assert (f"was compiled with MAX_ROWS = {vocabulary.FRAME_MAX_ROWS} where "
            f"runtime/codec/vocabulary.py says {vocabulary.FRAME_MAX_ROWS // 2}") in result.stderr
