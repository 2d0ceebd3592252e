"""The segment map and its fragmentation numbers on segments written by hand."""

import pytest

from core.memory.segments import segment_view

KiB = 1024


def segment(address, blocks, total=None, **extra):
    return {"address": address, "total_size": total or sum(b["size"] for b in blocks), "blocks": blocks, **extra}


def test_offsets_states_and_fragmentation_by_hand():
    small = segment(
        0x1000_0000,
        [
            {"address": 0x1000_0000, "size": 4 * KiB, "state": "active_allocated"},
            {"address": 0x1000_1000, "size": 2 * KiB, "state": "inactive"},
            {"size": 2 * KiB, "state": "active_allocated"},  # no address: follows the previous block
        ],
        segment_type="small",
    )
    large = segment(
        0x2000_0000,
        [
            {"address": 0x2000_0000, "size": 6 * KiB, "state": "inactive"},
            {"address": 0x2000_2000, "size": 8 * KiB, "state": "active_allocated"},  # after a gap of 2 KiB
        ],
        total=16 * KiB,
        segment_type="large",
        is_expandable=True,
    )
    view, numbers = segment_view([small, large])
    # largest first
    assert [s["total_size"] for s in view] == [16 * KiB, 8 * KiB]
    assert view[0]["expandable"] is True and view[1]["expandable"] is False
    assert view[0]["segment_type"] == "large"
    assert [(b["offset"], b["size"], b["state"]) for b in view[1]["blocks"]] == [
        (0, 4 * KiB, "active_allocated"),
        (4 * KiB, 2 * KiB, "inactive"),
        (6 * KiB, 2 * KiB, "active_allocated"),
    ]
    assert [b["offset"] for b in view[0]["blocks"]] == [0, 0x2000]
    # free: 2 KiB + 6 KiB = 8 KiB, the largest hole 6 KiB → 1 − 6/8 = 0.25
    assert numbers == {
        "largest_free_block_bytes": 6 * KiB,
        "free_in_reserved_bytes": 8 * KiB,
        "fragmentation_ratio": pytest.approx(0.25),
    }


def test_no_free_space_is_no_fragmentation():
    full = segment(0, [{"address": 0, "size": 512, "state": "active_allocated"}])
    assert segment_view([full])[1] == {
        "largest_free_block_bytes": 0,
        "free_in_reserved_bytes": 0,
        "fragmentation_ratio": 0.0,
    }
    one_hole = segment(0, [{"address": 0, "size": 512, "state": "inactive"}])
    assert segment_view([one_hole])[1]["fragmentation_ratio"] == 0.0  # the free space is one block


def test_caps_count_what_they_drop_but_not_the_numbers():
    segs = [
        segment(i * 4096, [{"address": i * 4096 + j * 8, "size": 8, "state": "inactive"} for j in range(5)])
        for i in range(4)
    ]
    view, numbers = segment_view(segs, max_segments=2, max_blocks=3)
    assert len(view) == 2
    assert all(len(s["blocks"]) == 3 and s["blocks_dropped"] == 2 for s in view)
    # the numbers still cover all 4 × 5 blocks of 8 bytes
    assert numbers["free_in_reserved_bytes"] == 160 and numbers["largest_free_block_bytes"] == 8
    assert numbers["fragmentation_ratio"] == pytest.approx(1 - 8 / 160)
