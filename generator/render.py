"""Renders views through the Jinja2 templates shipped in ``protoframe/templates``."""

from __future__ import annotations

import jinja2


def environment() -> jinja2.Environment:
    """The one Jinja2 environment: strict about undefined names, no autoescaping (it is code)."""
    env = jinja2.Environment(
        # Through the package, never the checkout: the templates ship as package data.
        loader=jinja2.PackageLoader("protoframe", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["pyrepr"] = _pyrepr
    return env


def _pyrepr(value: object) -> str:
    # Double quotes, as ruff's formatter would write them.
    text = repr(value)
    if isinstance(value, str) and text.startswith("'") and '"' not in value:
        text = '"' + text[1:-1] + '"'
    return text


def render(env: jinja2.Environment, template: str, **context: object) -> str:
    """Render one template; trailing spaces are stripped and the file ends in one newline."""
    text = env.get_template(template).render(**context)
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"
