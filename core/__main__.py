"""``python -m core …``: the lab's command line (see :mod:`core.cli`).

Ctrl-C before a command's own handling is in place (while the engine imports, or the worker starts) ends it
here: exit 130 with one line, never a traceback."""

import sys

try:
    from core.cli import main

    code = main()
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    code = 130
    # A KeyboardInterrupt that crossed exec() of a string (dataclasses builds its methods so) leaves CPython
    # flagged to end the process by SIGINT at exit, caught or not; the next exec() of a string clears the flag.
    exec("")
sys.exit(code)
