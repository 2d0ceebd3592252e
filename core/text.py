"""Text that users and files supply: one length limit for labels, and how it is quoted and printed.

Run names and tags enter from the CLI (``--name``, ``runs`` commands), the pages and import files;
:func:`label_problem` is the one rule they all pass (at most :data:`MAX_LABEL_CHARS` characters, no
control characters). Anything from outside that is printed on a terminal goes through
:func:`terminal_text`, so an escape sequence cannot clear the screen or move the cursor and a newline
cannot fake a line of output; :func:`quoted` keeps a hostile field short when an error quotes it.
"""

from __future__ import annotations

import re
import signal

MAX_LABEL_CHARS = 120  # a run's name and each of its tags
MAX_TAGS = 32
# Unicode's control characters (category Cc: C0, DEL and C1) and the format characters that reorder or hide
# what a terminal shows (bidirectional overrides and isolates). One pattern, so a 100,000-line report is
# checked at C speed, not a character at a time.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def label_problem(value: object, what: str = "name") -> str | None:
    """Why ``value`` cannot be a run's name or tag, or None when it can."""
    if not isinstance(value, str):
        return f"{what} must be text, got {type(value).__name__}"
    if len(value) > MAX_LABEL_CHARS:
        return f"{what} is {len(value):,} characters long; the limit is {MAX_LABEL_CHARS}"
    if bad := _CONTROL.search(value):
        return f"{what} contains the control character {_escaped(bad)}"
    return None


def tags_problem(tags: object) -> str | None:
    """Why ``tags`` cannot be a run's tags, or None."""
    if not isinstance(tags, list):
        return f"tags must be a list, got {type(tags).__name__}"
    if len(tags) > MAX_TAGS:
        return f"{len(tags)} tags; the limit is {MAX_TAGS}"
    return next((p for i, t in enumerate(tags) if (p := label_problem(t, f"tag {i + 1}"))), None)


def terminal_text(text: object, multiline: bool = False) -> str:
    """``text`` safe to print: control characters written as escapes (``\\x1b``, ``\\u202e``).

    With ``multiline`` the newlines of a message made of several lines (an error with a worker's
    last output) are kept; every other control character is still escaped.
    """
    text = str(text)
    if multiline:
        return "\n".join(terminal_text(line) for line in text.split("\n"))
    return _CONTROL.sub(_escaped, text)


def quoted(value: object, limit: int = 60) -> str:
    """``repr`` of a value from outside, cut to about ``limit`` characters (a 5 MB field stays short)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def first_line(exc: BaseException | str, limit: int = 300) -> str:
    """The first line of an error (a CUDA error's later lines are advice), cut to ``limit``; its type if empty."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def signal_text(returncode: int) -> str:
    """How a process ended, in words (a signal by name, with what it usually means)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        detail = {
            "SIGSEGV": " (segmentation fault)",
            "SIGKILL": " (killed, e.g. by the OS out-of-memory killer)",
            "SIGABRT": " (aborted)",
            "SIGBUS": " (bus error)",
        }.get(name, "")
        return f"killed by {name}{detail}"
    return f"exited with code {returncode}"
