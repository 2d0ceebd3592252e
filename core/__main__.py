"""``python -m core …``: the lab's command line (see :mod:`core.cli`).

Ctrl-C before a command's own handling is in place (while the engine imports, or the worker starts) ends it
here: exit 130 with one line, never a traceback. Until then SIGINT leaves at once from its handler: raised as
KeyboardInterrupt it could land inside importlib's own callbacks, where Python prints it as an ignored
exception with a traceback; :func:`core.cli.main` gives Ctrl-C back to the command as it starts it.

The cyclic garbage collector is off while the engine imports and never looks at what it imported again
(``gc.freeze``), and it skips the last collection at exit: the tens of thousands of objects an import makes live
until the process ends, and going through them cost a command about 10 ms during its imports and 12–15 ms at
exit, a tenth of reading a small trace (:mod:`core.worker` does the same for its imports)."""

import gc
import os
import signal
import sys


def _leave(signum, frame) -> None:
    print("interrupted", file=sys.stderr, flush=True)
    os._exit(130)  # nothing to clean: no command has started (a worker started ahead follows its parent out)


class _ClosedPipeIsQuiet:
    """stdout that stops writing once its reader has gone (``python -m core trace T | head``): the command goes on
    and exits with its own code, where the first write past the reader's end ended it in a traceback and exit 1."""

    def __init__(self, stream) -> None:
        self._stream, self.closed_by_reader = stream, False

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        self.closed_by_reader = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())  # what is still buffered goes nowhere

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


signal.signal(signal.SIGINT, _leave)
gc.disable()
sys.stdout = _ClosedPipeIsQuiet(sys.stdout)
from core.workerlaunch import prestart_for  # noqa: E402 - the standard library's process plumbing alone

prestart_for(sys.argv[1:])  # a command whose job runs in a worker starts it first: its start is the long part
from core.cli import main  # noqa: E402 - after the handler: this import is the slow part

gc.freeze()
gc.enable()
code = main()
gc.freeze()  # what is left is freed as the process ends: no collection needed to find it
sys.exit(code)
