"""``python -m core …``: the lab's command line (see :mod:`core.cli`)."""

import sys

from core.cli import main

sys.exit(main())
