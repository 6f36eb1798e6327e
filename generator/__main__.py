"""Allows ``python -m protoframe.generator`` (the same as ``protoframe``)."""

import sys

from protoframe.generator.cli import main

sys.exit(main())
