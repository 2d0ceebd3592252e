"""The errors every layer of the lab raises: a config that cannot run, a device that cannot run it, a
run that would not fit. The frame of the lab (nothing here imports the rest of ``core``), so the
hardware facts, the experiments, the worker and the pages all raise and catch the same classes."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config that cannot run; the message names the field and the limit."""


class InputRefused(ValueError):
    """A file the lab will not take in; nothing was stored (raised by :mod:`core.intake` and the readers). Here, not
    there: the command that imports a file catches it without loading the reader."""


class Unsupported(Exception):
    """The device cannot run this experiment (the run is stored with status ``unsupported``)."""


class DoesNotFit(ConfigError):
    """A run whose estimated memory need is more than its device can give: refused before allocating.

    Bad input, like a ConfigError (the CLI exits 2); the worker stores it as an error whose ``meta``
    carries ``refused`` with the estimate and the limit.
    """

    def __init__(self, message: str, need_bytes: int, limit_bytes: int, source: str) -> None:
        super().__init__(message)
        self.meta = {"refused": {"need_bytes": int(need_bytes), "limit_bytes": int(limit_bytes), "limit": source}}


class SpawnCancelled(Exception):
    """The caller gave up on a worker before the fork server answered (a Ctrl-C while torch imports); the child, if
    it comes, is killed (:mod:`core.forkserver`). Here, not there: the job queue catches it without importing the
    fork server into every command."""
