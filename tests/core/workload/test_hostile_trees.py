"""Hostile snapshots of issue 32 (holes 3 and 4, pickle part): tiny pickles whose shared tuples cost 2^40 steps
to hash or print, and gzip bombs. Each is written here, small, and imported by the CLI under bounded CPU time
and RSS for its whole process tree (``bounded_cli``): refused with exit 2, the limit named, nothing stored."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from core.limits import LIMITS
from tests.core.workload.test_hostile_files import bounded_cli, files_under

CPU_S = 10.0


def dag(levels: int, memo: bytes = b"\x94") -> bytes:
    """Opcodes that push t_levels, where t_0 = () and t_k = (t_k-1, t_k-1) by two memo fetches: 6 bytes a level,
    2^levels steps to hash or print. Memo slots 0..levels (the only ones: :func:`plain` memoizes nothing)."""
    out = b")" + memo
    for k in range(levels):
        out += b"h" + bytes([k]) + b"h" + bytes([k]) + b"\x86" + memo
    return out


def list_dag(levels: int) -> bytes:
    """The same with lists: l_k = [l_k-1, l_k-1] (never hashed, but 2^levels items to print)."""
    out = b"]\x94"
    for k in range(levels):
        out += b"](h" + bytes([k]) + b"h" + bytes([k]) + b"e\x94"
    return out


def plain(value) -> bytes:
    """Protocol-2 opcodes of dicts, lists, strings and ints with no memo; ``bytes`` are opcodes spliced in."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, dict):
        return b"}(" + b"".join(plain(k) + plain(v) for k, v in value.items()) + b"u"
    if isinstance(value, list):
        return b"](" + b"".join(map(plain, value)) + b"e"
    if isinstance(value, str):
        raw = value.encode()
        return b"\x8c" + bytes([len(raw)]) + raw
    return b"J" + int(value).to_bytes(4, "little", signed=True)


def snapshot_pickle(*, state=None, frame=None, action=None) -> bytes:
    event = {"action": action or "alloc", "addr": 4096, "size": 512, "time_us": 1, "frames": [frame or "f"]}
    block = {"size": 512, "state": state or "active_allocated"}
    top = {"segments": [{"address": 0, "total_size": 1 << 20, "blocks": [block]}], "device_traces": [[event]]}
    return b"\x80\x04" + plain(top) + b"."


def refused_fast(path: Path, data_dir: Path, *reasons: str):
    """Exit 2 naming the file and one of ``reasons`` (the limit), within :data:`CPU_S` and 1 GiB; nothing kept."""
    before = files_under(data_dir)
    out = bounded_cli("snapshot", str(path), wall_s=CPU_S)
    assert out.code == 2, (out.code, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert any(reason in out.stderr for reason in reasons), out.stderr[-2000:]
    assert path.name in out.stderr, out.stderr[-2000:]
    assert not {p for p in files_under(data_dir) - before if "snapshots" in p}
    if (data_dir / "runs.sqlite").exists():
        from core.store import RunStore

        assert RunStore().count() == 0
    return out


TREE = "pickle_tree_objects limit"


def test_a_332_byte_dict_key_of_40_shared_tuple_levels_is_refused(tmp_path, data_dir):
    path = tmp_path / "key.pickle"
    path.write_bytes(b"\x80\x04}(" + dag(40) + b"K\x01u.")
    assert path.stat().st_size < 400
    refused_fast(path, data_dir, TREE)


@pytest.mark.parametrize("where", ["state", "frame", "action"])
def test_shared_tuples_as_a_block_state_frame_or_action_are_refused(tmp_path, data_dir, where):
    path = tmp_path / f"{where}.pickle"
    path.write_bytes(snapshot_pickle(**{where: dag(40)}))
    assert path.stat().st_size < 600
    refused_fast(path, data_dir, TREE)


def test_shared_lists_as_a_block_state_are_never_printed(tmp_path, data_dir):
    path = tmp_path / "lists.pickle"
    path.write_bytes(snapshot_pickle(state=list_dag(40), frame=list_dag(40)))
    out = bounded_cli("snapshot", str(path), "--no-save", wall_s=CPU_S)
    assert out.code in (0, 2), out.stderr[-2000:]
    assert "Traceback" not in out.stderr, out.stderr[-2000:]


def gz(path: Path, *parts: tuple[bytes, int]) -> Path:
    """A gzip file of each ``(bytes, times)`` in turn, written a chunk at a time."""
    with gzip.open(path, "wb", compresslevel=9) as fh:
        for data, times in parts:
            for _ in range(times):
                fh.write(data)
    return path


RATIO = "inflate_ratio limit"
CONTAINERS = "pickle_containers limit"


def test_a_gzip_of_empty_dicts_is_refused_before_it_inflates(tmp_path, data_dir):
    path = gz(tmp_path / "dicts.pickle.gz", (b"\x80\x04]", 1), (b"(" + b"}" * 999_999 + b"e", 40), (b".", 1))
    assert path.stat().st_size < 64 << 10
    refused_fast(path, data_dir, RATIO, CONTAINERS)  # the containers' count may come first


def test_a_gzip_json_of_empty_objects_is_refused_before_it_inflates(tmp_path, data_dir):
    path = gz(tmp_path / "objects.json.gz", (b'{"segments": [', 1), (b"{}," * 1_000_000, 30), (b'{}], "x": 1}', 1))
    assert path.stat().st_size < 128 << 10
    refused_fast(path, data_dir, RATIO)


def test_a_gzip_of_long_strings_is_refused_before_it_inflates(tmp_path, data_dir):
    string = b"\x8d" + (32 << 20).to_bytes(8, "little")  # BINUNICODE8 of 32 MiB
    path = gz(tmp_path / "strings.pickle.gz", (b"\x80\x05](", 1), (string + b"x" * (32 << 20), 4), (b"e.", 1))
    refused_fast(path, data_dir, RATIO)


def test_a_gzip_memo_slot_after_64_mb_of_padding_is_refused_before_it_inflates(tmp_path, data_dir):
    padding = 64 << 20
    path = gz(
        tmp_path / "memo.pickle.gz",
        (b"\x80\x04\x8e" + padding.to_bytes(8, "little"), 1),
        (b"\x00" * (1 << 20), 64),
        (b"r" + (64 << 20).to_bytes(4, "little") + b".", 1),
    )
    assert path.stat().st_size < 128 << 10
    refused_fast(path, data_dir, RATIO)


def test_a_real_snapshot_gzip_inflates_within_the_ratio():
    for example in sorted(Path("examples/snapshots").glob("*.gz")):
        assert len(gzip.decompress(example.read_bytes())) < LIMITS.inflate_ratio * example.stat().st_size / 4


def test_a_plain_pickle_of_empty_dicts_is_refused_by_its_containers(tmp_path, data_dir):
    path = tmp_path / "dicts.pickle"
    path.write_bytes(b"\x80\x04]" + (b"(" + b"}" * 999_999 + b"e") * 8 + b".")
    refused_fast(path, data_dir, CONTAINERS)
