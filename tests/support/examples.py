"""How many cases a test runs: all of them in ``make test``, a fifth in ``make test-fast``.

``make test-fast`` loads the hypothesis profile ``fast`` (registered in tests/conftest.py),
whose ``max_examples`` is a fifth of hypothesis' default. Tests that set their own
``max_examples``, and seeded campaigns that do not use hypothesis, pass their full count
through ``scaled`` to follow the same ratio; ``make test`` keeps every count as written.
Parametrized sweeps of many like cases (every spec mutation, every generated module) pass
their cases through ``sweep``: every fifth case runs in both loops, the others are marked
``slow``, which ``make test-fast`` leaves out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from _pytest.mark import ParameterSet
from hypothesis import settings

DEFAULT_EXAMPLES = 100  # hypothesis' own default max_examples: the full-size ratio
FAST_EXAMPLES = 20
FLOOR = 10  # a smaller sample than this says too little to be worth running at all


def scaled(count: int) -> int:
    """``count`` in the active profile's proportion, but never below ``min(count, FLOOR)``."""
    active = settings.default
    ratio = (active.max_examples if active is not None else DEFAULT_EXAMPLES) / DEFAULT_EXAMPLES
    if ratio >= 1:
        return count
    return max(min(count, FLOOR), round(count * ratio))


def sweep(cases: Sequence[Any]) -> list[ParameterSet]:
    """``cases`` as parameters, all but every fifth (the first included) marked ``slow``; a
    tuple is one case of several arguments."""
    every = DEFAULT_EXAMPLES // FAST_EXAMPLES
    return [pytest.param(*(case if isinstance(case, tuple) else (case,)),
                         marks=() if index % every == 0 else pytest.mark.slow)
            for index, case in enumerate(cases)]
