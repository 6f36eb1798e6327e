"""protoframe's code generator: specs -> validated IR -> Jinja2 templates -> ``generated/``."""
