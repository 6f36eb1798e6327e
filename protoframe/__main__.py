"""Allows ``python -m protoframe`` (the same as the ``protoframe`` command)."""

import sys

from protoframe.generator.cli import main

sys.exit(main())
