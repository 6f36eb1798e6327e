"""Build of the optional C extension; everything else is declared in pyproject.toml.

``runtime/_wirecodec.c`` is the compiled fast path of the generated protobuf codecs. It is
optional: without a C compiler the install still succeeds and the Python codecs run.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "runtime._wirecodec",
            sources=["runtime/_wirecodec.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
            optional=True,
        )
    ]
)
