"""Every cap on what a file from outside may make the lab hold, with an operator's changes from ``GPULAB_LIMITS``.

Apart from :mod:`core.intake`, which enforces most of them, so that a command that reads no file (the CLI waiting on
its worker) checks the setting without loading the readers."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

from core.errors import ConfigError


@dataclass(frozen=True)
class Limits:
    """Every cap on what a file from outside (and the worker's report of it) may make the lab hold.

    Stated here once; each refusal names the limit it hit. docs/OPERATIONS.md ("Limits on imported
    files") lists them for users.
    """

    # A gzip file inflates to at most inflate_ratio × its size (at least inflate_floor_bytes, at most
    # inflated_bytes), stopped as it inflates: 39 KiB of gzip made 3.4 GiB of empty dicts
    inflate_ratio: int = 100
    inflate_floor_bytes: int = 8 << 20
    inflated_bytes: int = 32 << 30
    # A pickle, checked opcode by opcode as the unpickler is fed, before it acts on them:
    pickle_memo_index: int = 1 << 26  # memo slots (the C unpickler sizes its memo table by the largest index)
    pickle_pending_values: int = 2_000_000  # values waiting on the unpickler's stack (counted generously)
    pickle_declared_bytes: int = 256 << 20  # one string, bytes object or frame, as its length prefix declares
    pickle_line_bytes: int = 1 << 20  # one argument line of protocol 0
    # Tuples counted as expanded trees (a memo slot fetched again counts again), and the hashing of dict keys
    # and set elements: at most this + this per byte read (a 332-byte file's dict key cost 2^40 steps)
    pickle_tree_objects: int = 1 << 20
    pickle_tree_objects_per_byte: int = 16
    # Containers made (empty dicts, lists, sets and marks, counted by their opcode bytes): at most this + one per
    # pickle_bytes_per_container bytes (a real snapshot makes one per 10–40 bytes)
    pickle_containers: int = 1 << 20
    pickle_bytes_per_container: int = 4
    # What an import keeps of each stack and name (longer ones are cut, the cut is noted):
    frames_per_stack: int = 256
    name_chars: int = 1024
    # One line of the worker's output (a result is one line):
    worker_line_bytes: int = 64 << 20
    # The files of one import of a job's rank traces (a folder or several files), each read in turn:
    rank_files: int = 512
    # One rank's flight-recorder dump (`hang DIR`): its bytes (as read, a gzip counted inflated), the JSON objects
    # and lists it may make (counted before decoding), and its entries (a ring buffer per process)
    fr_dump_bytes: int = 512 << 20
    fr_json_containers: int = 4_000_000
    fr_entries: int = 1_000_000
    # A runs file (Compare's import, `runs import`): the JSON objects and lists it may make, counted as its `{` and
    # `[` while it is inflated, before anything is decoded (242 KiB of gzip made 85 M `{}`: 4 GiB), and its runs:
    runs_file_containers: int = 4_000_000
    runs_per_file: int = 100_000
    # A profiler trace, checked as its events are decoded, before anything is grouped:
    number_digits: int = 4300  # digits of one number (Python's own cap on converting an int to text)
    trace_time_ns: int = 2**63  # a time or a duration, either side of 0
    trace_devices: int = 4096
    trace_streams: int = 65_536  # streams of one device
    trace_names: int = 65_536  # distinct kernel names
    # The CPU time one import may take, from the bytes it may read (a gzip file counted at what it may inflate
    # to): a 178-byte trace once held the CPU queue for the hour of a job's limit (core/import_budget.py)
    import_cpu_s: float = 60.0
    import_cpu_s_per_100mb: float = 20.0


LIMITS_ENV = "GPULAB_LIMITS"


# The largest a limit may be set to: a count or size still fits the C long the kernel and numpy take (a time in ns is
# one of them), a time is under 32 years (RLIMIT_CPU takes whole seconds in a C long)
MAX_WHOLE = 2**63
MAX_SECONDS = 1e9


def limits_from(text: str) -> Limits:
    """The limits with an operator's changes, ``name=value`` separated by commas (``inflate_ratio=200,
    rank_files=1024``): whole numbers from 1 to 2^63 for counts and sizes, seconds from 0 to 10^9 for times. A
    ConfigError names the entry it cannot take (and the limit meant, where a name is misspelled)."""
    changes: dict[str, int | float] = {}
    kinds = {f.name: f.type for f in dataclasses.fields(Limits)}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, _, value = (part.strip() for part in entry.partition("="))
        if name not in kinds:
            import difflib  # only to name the limit a typo meant

            near = difflib.get_close_matches(name, kinds, n=1)
            meant = f"did you mean {near[0]}? " if near else ""
            raise ConfigError(f"{LIMITS_ENV}: no limit is called {name!r} ({meant}the limits: {', '.join(kinds)})")
        whole = kinds[name] == "int"
        try:
            number = int(value) if whole else float(value)
        except ValueError:
            number = math.nan
        low, high = (1, MAX_WHOLE) if whole else (0, MAX_SECONDS)
        if not low <= number <= high:  # NaN and infinities fail too
            wanted = "a whole number from 1 to 2^63" if whole else "a number of seconds from 0 to 1,000,000,000"
            raise ConfigError(f"{LIMITS_ENV}: {name} must be {wanted}, got {value[:40]!r}")
        changes[name] = number
    return dataclasses.replace(Limits(), **changes)


def _configured() -> tuple[Limits, str | None]:
    try:
        return limits_from(os.environ.get(LIMITS_ENV, "")), None
    except ConfigError as exc:
        return Limits(), str(exc)


LIMITS, _LIMITS_PROBLEM = _configured()


def check_limits() -> None:
    """Raise the ConfigError of a malformed ``GPULAB_LIMITS`` (the CLI and the worker check it as they start,
    so a typo is named, not silently replaced by the defaults)."""
    if _LIMITS_PROBLEM:
        raise ConfigError(_LIMITS_PROBLEM)
