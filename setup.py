"""Build of the optional C extensions; everything else is declared in pyproject.toml.

``runtime/codec/_wirecodec.c`` is the compiled fast path of the generated protobuf codecs,
``runtime/codec/_framecodec.c`` that of the generated frame codecs, and
``runtime/codec/_columnar.c`` decodes runs of protobuf values into Arrow column buffers
(runtime/spark/columnar.py). All are optional: without a C compiler the install still succeeds
and the Python codecs run (and Spark decoding takes the row path).
"""

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
         "-Wno-missing-field-initializers", "-Wno-cast-function-type"]

setup(
    ext_modules=[
        Extension(f"protoframe.runtime.codec.{name}", sources=[f"runtime/codec/{name}.c"],
                  depends=["runtime/codec/_codec_common.h", "runtime/codec/_vocabulary.h"],
                  extra_compile_args=FLAGS, optional=True)
        for name in ("_wirecodec", "_framecodec", "_columnar")
    ]
)
