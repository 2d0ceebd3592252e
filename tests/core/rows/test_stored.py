"""Reading a stored dict into its class: the keys it names as stored, an earlier version's missing keys as defaults,
and what a later version added kept aside so writing it back loses nothing."""

from dataclasses import dataclass, field

from core.rows.stored import read, split


@dataclass(frozen=True)
class Point:
    size: int = 0
    label: str = "?"
    cache: tuple = ()
    extra: dict = field(default_factory=dict)


def test_split_keeps_what_the_class_does_not_name_and_skips_what_is_read_apart():
    stored = {"size": 4096, "label": "bf16", "cache": [1], "added_later": True, "extra": "a stored key named extra"}
    assert split(Point, stored) == (
        {"size": 4096, "label": "bf16", "cache": [1]},
        {"added_later": True, "extra": "a stored key named extra"},
    )
    assert split(Point, stored, skip=frozenset({"cache"}))[1] == {
        "cache": [1],
        "added_later": True,
        "extra": "a stored key named extra",
    }


def test_read_takes_defaults_for_the_keys_an_earlier_version_lacked():
    assert read(Point, {"size": 8}) == Point(size=8)
