"""Labels from outside: the one length and control-character rule, and safe printing."""

import sys
import unicodedata

from core.text import MAX_LABEL_CHARS, MAX_TAGS, first_line, label_problem, quoted, tags_problem, terminal_text


def test_labels_up_to_120_characters_without_control_characters():
    assert MAX_LABEL_CHARS == 120
    assert label_problem("x" * 120) is None and label_problem("résumé — 日本") is None
    assert label_problem("x" * 1234) == "name is 1,234 characters long; the limit is 120"
    assert label_problem("a\x1b[2Jb") == "name contains the control character \\x1b"
    assert label_problem("evil\u202eexe", "tag 3") == "tag 3 contains the control character \\u202e"
    assert label_problem(5) == "name must be text, got int"


def test_tags_are_a_short_list_of_labels():
    assert tags_problem(["a", "b"]) is None
    assert tags_problem("a,b") == "tags must be a list, got str"
    assert MAX_TAGS == 32 and tags_problem(["t"] * 33) == "33 tags; the limit is 32"
    assert tags_problem(["ok", "bad\n"]) == "tag 2 contains the control character \\n"


def test_terminal_escapes_what_would_move_the_cursor():
    assert terminal_text("a\x1b[2Jb\rc") == "a\\x1b[2Jb\\rc"
    assert terminal_text("left\u202eright") == "left\\u202eright"
    assert terminal_text("one\ntwo") == "one\\ntwo"
    assert terminal_text("one\ntwo\x07", multiline=True) == "one\ntwo\\x07"
    assert terminal_text(3.5) == "3.5"


def test_every_control_character_of_unicode_and_only_those_is_escaped():
    # Unicode's own table: category Cc, and the bidirectional marks, overrides and isolates (category Cf)
    bidi = {"\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}
    every = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    escaped = {ch for ch in every if terminal_text(ch) != ch}
    assert escaped == {ch for ch in every if unicodedata.category(ch) == "Cc"} | bidi
    assert len(escaped) == 65 + 12
    assert all(terminal_text(ch) == ch.encode("unicode_escape").decode("ascii") for ch in escaped)


def test_quoted_keeps_a_hostile_field_short():
    assert quoted("abc") == "'abc'"
    long = "z" * 5_000_000
    # repr adds two quotes: 5,000,002 characters, cut to the first 60
    assert quoted(long) == "'" + "z" * 59 + "… (5,000,002 characters)"


def test_first_line_of_an_error():
    assert first_line(RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be…")) == (
        "CUDA error: out of memory"
    )
    assert first_line(ValueError("")) == "ValueError"
    assert first_line("x" * 400, limit=10) == "x" * 10
