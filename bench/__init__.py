"""Benchmarks, run with ``make bench`` (``python -m bench [NAME ...]``).

Each benchmark is a module ``bench/bench_<name>.py`` that defines ``main() -> None`` and is
listed in ``bench.__main__.BENCHMARKS``. Benchmarks write nothing inside the repository: what
they generate goes to a temporary directory.
"""
