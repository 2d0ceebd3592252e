"""``python -m core …``: the lab's command line (see :mod:`core.cli`).

Ctrl-C before a command's own handling is in place (while the engine imports, or the worker starts) ends it
here: exit 130 with one line, never a traceback. Until then SIGINT leaves at once from its handler: raised as
KeyboardInterrupt it could land inside importlib's own callbacks, where Python prints it as an ignored
exception with a traceback; :func:`core.cli.main` gives Ctrl-C back to the command as it starts it."""

import os
import signal
import sys


def _leave(signum, frame) -> None:
    print("interrupted", file=sys.stderr, flush=True)
    os._exit(130)  # nothing to clean: no command has started (a worker started ahead follows its parent out)


signal.signal(signal.SIGINT, _leave)
from core.cli import main  # noqa: E402 - after the handler: this import is the slow part

sys.exit(main())
