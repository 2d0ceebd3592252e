"""``python -m core …``: the lab's command line (see :mod:`core.cli`).

Ctrl-C before a command's own handling is in place (while the engine imports, or the worker starts) ends it
here: exit 130 with one line, never a traceback."""

import os
import sys

try:
    from core.cli import main

    code = main()
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr, flush=True)
    sys.stdout.flush()
    # A KeyboardInterrupt that crossed the exec() dataclasses builds their methods with leaves CPython flagged to
    # end the process by SIGINT at a normal exit, caught or not (exit status -2, not 130): leave at once instead.
    # A worker started ahead of the command follows its parent out (it watches it).
    os._exit(130)
sys.exit(code)
