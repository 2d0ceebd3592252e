"""The caching allocator's segments as a compact map (offsets, sizes, states) and the fragmentation it implies.

One reading for every source of segments: ``torch.cuda.memory._snapshot()`` taken after a step of the
allocator lab, or a segment list rebuilt at any moment of an imported snapshot.
"""

from __future__ import annotations

MAX_SEGMENTS = 256
MAX_BLOCKS_PER_SEGMENT = 256


def segment_view(
    segments: list[dict], max_segments: int = MAX_SEGMENTS, max_blocks: int = MAX_BLOCKS_PER_SEGMENT
) -> tuple[list[dict], dict]:
    """Compact JSON segment map (largest segments first) and the fragmentation numbers of all of them.

    Blocks tile their segment in address order; a block without an address follows the previous one.
    ``largest_free_block_bytes`` is the biggest request that fits without a new cudaMalloc;
    ``fragmentation_ratio`` is 1 − largest hole / all free bytes (0: the free space is one block).
    """
    compact, largest_free, free_total = [], 0, 0
    for seg in segments:
        blocks, offset = [], 0
        for block in seg.get("blocks", []):
            state = block.get("state", "")
            if state == "inactive":
                largest_free = max(largest_free, block["size"])
                free_total += block["size"]
            if "address" in block:
                offset = block["address"] - seg["address"]
            blocks.append({"offset": offset, "size": block["size"], "state": state})
            offset += block["size"]
        compact.append(
            {
                "total_size": seg["total_size"],
                "segment_type": seg.get("segment_type"),
                "expandable": bool(seg.get("is_expandable", False)),
                "blocks": blocks[:max_blocks],
                "blocks_dropped": max(0, len(blocks) - max_blocks),
            }
        )
    compact.sort(key=lambda s: -s["total_size"])
    numbers = {
        "largest_free_block_bytes": largest_free,
        "free_in_reserved_bytes": free_total,
        "fragmentation_ratio": (1 - largest_free / free_total) if free_total else 0.0,
    }
    return compact[:max_segments], numbers
