"""Two profiler traces side by side: what got slower, by kernel group and by kernel.

Works on what an imported trace stores (its ``group`` and ``kernel`` rows, :mod:`core.workload.trace`), so a
file and a stored run compare alike. Groups are the lab's vendor-neutral kernel groups (a cuBLAS GEMM on
one side and a hipBLASLt ``Cijk_`` GEMM on the other are both *matmul*); kernels are matched by a
normalised name (call arguments dropped, every number folded to ``#``), so a kernel whose tile sizes or
unroll factors changed still meets itself while kernels of different templates stay apart. A kernel outside one side's listed top kernels counts
as absent there: the group rows are complete, the kernel rows are as complete as the imports' lists.
"""

from __future__ import annotations

import re

_ARGS = re.compile(r"\([^()]*\)")
_NUMBER = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def normalised(name: str) -> str:
    """A kernel name without its call arguments and with every number folded to ``#``."""
    previous = None
    while previous != name:  # nested (…) from the inside out
        previous, name = name, _ARGS.sub("", name)
    name = _NUMBER.sub("#", name.removeprefix("void "))
    return _SPACE.sub(" ", name).strip()


def _side(rows: list[dict], kind: str, key) -> dict[str, list]:
    """key → [count, µs, group] summed over the rows of one ``kind``."""
    out: dict[str, list] = {}
    for r in rows:
        if r.get("kind") != kind:
            continue
        entry = out.setdefault(key(r), [0, 0.0, r.get("group")])
        entry[0] += int(r.get("count") or 0)
        entry[1] += float(r.get("total_us") or 0.0)
    return out


def diff(base_rows: list[dict], new_rows: list[dict]) -> list[dict]:
    """Rows of kind ``group`` (every group either side has) and ``kernel`` (matched by normalised name), each
    with ``base_us``, ``new_us``, ``delta_us`` (new − base), counts and ``delta_pct`` (of base; None from 0),
    the largest slow-down first within each kind."""
    out: list[dict] = []
    for kind, key in (("group", lambda r: str(r["group"])), ("kernel", lambda r: normalised(str(r["name"])))):
        base, new = _side(base_rows, kind, key), _side(new_rows, kind, key)
        rows = []
        for name in sorted(set(base) | set(new)):
            b = base.get(name, [0, 0.0, None])
            n = new.get(name, [0, 0.0, None])
            if kind == "group" and not (b[0] or n[0]):
                continue  # a group neither trace has
            row = {"kind": kind, "group": n[2] or b[2] if kind == "kernel" else name}
            if kind == "kernel":
                row["kernel"] = name
            rows.append(
                row
                | {
                    "base_us": b[1],
                    "new_us": n[1],
                    "delta_us": n[1] - b[1],
                    "base_count": b[0],
                    "new_count": n[0],
                    "delta_pct": 100.0 * (n[1] - b[1]) / b[1] if b[1] else None,
                }
            )
        out += sorted(rows, key=lambda r: -r["delta_us"])
    return out


def totals(rows: list[dict]) -> dict:
    """Kernel time of each side and the change, from the group rows."""
    groups = [r for r in rows if r["kind"] == "group"]
    base, new = sum(r["base_us"] for r in groups), sum(r["new_us"] for r in groups)
    return {
        "base_us": base,
        "new_us": new,
        "delta_us": new - base,
        "delta_pct": 100 * (new - base) / base if base else None,
    }
