"""``python -m remat_core``: the command line (see :mod:`remat_core.cli`)."""

import sys

from .cli import main

sys.exit(main())
