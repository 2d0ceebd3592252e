"""The bounded reader every outside file goes through: sizes counted while reading, gzip bounded, JSON
strict and depth-capped, pickles of plain data only."""

import collections
import gzip
import io
import os
import pickle

import pytest

from core.errors import InputRefused
from core.intake import check_depth, gunzip_limited, loads_json, loads_pickle, read_input, read_limited


@pytest.mark.timeout(120)  # reading /dev/zero to its end would never stop: the limit fails it, not a clock
def test_dev_zero_is_refused_at_the_limit_quickly():
    with pytest.raises(InputRefused, match="larger than the 4 MiB limit"):
        read_limited("/dev/zero", 4 * 2**20, "runs file")  # st_size is 0: only counting can stop it


def test_a_pipe_is_counted_too(tmp_path):
    r, w = os.pipe()
    os.write(w, b"x" * 5000)
    os.close(w)
    with os.fdopen(r, "rb") as stream, pytest.raises(InputRefused, match="4 KiB"):
        read_limited(stream, 4096)


def test_exactly_the_limit_is_accepted_and_missing_or_directory_is_named(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"a" * 100)
    assert read_limited(path, 100) == b"a" * 100
    with pytest.raises(InputRefused, match="cannot read .*No such file"):
        read_limited(tmp_path / "missing", 10)
    with pytest.raises(InputRefused, match="is a directory, not a trace"):
        read_limited(tmp_path, 10, "trace")


def test_gzip_bomb_is_stopped_at_the_limit_and_multi_member_gzip_reads_whole():
    bomb = gzip.compress(b"\0" * (8 * 2**20))  # 8 MiB of zeros packs into ~8 KiB
    assert len(bomb) < 20_000
    with pytest.raises(InputRefused, match="expands to more than"):
        gunzip_limited(bomb, 2**20)
    assert gunzip_limited(gzip.compress(b"ab") + gzip.compress(b"cd"), 10) == b"abcd"
    with pytest.raises(InputRefused, match="truncated"):
        gunzip_limited(gzip.compress(b"hello world" * 100)[:-12], 10_000)


def test_read_input_unzips_by_content_not_name(tmp_path):
    path = tmp_path / "trace.json"  # no .gz suffix, gzip inside
    path.write_bytes(gzip.compress(b'{"a": 1}'))
    assert read_input(path, 100) == b'{"a": 1}'


def test_json_is_strict_and_depth_capped():
    assert loads_json(b'\xef\xbb\xbf{"a": [1, 2.5, "x", null]}') == {"a": [1, 2.5, "x", None]}
    for bad, why in (
        (b'{"a": NaN}', "not valid JSON"),
        (b'{"a": Infinity}', "not valid JSON"),
        (b'{"a": 1', "truncated"),
        (b"\xff\xfe", "not UTF-8"),
    ):
        with pytest.raises(InputRefused, match=why):
            loads_json(bad)
    deep = b"[" * 900 + b"]" * 900  # loads with json, then breaks every recursive consumer
    with pytest.raises(InputRefused, match="deeper than 64 levels"):
        loads_json(deep)
    with pytest.raises(InputRefused, match="deeper"):
        loads_json(b"[" * 200_000 + b"]" * 200_000)  # deeper than the parser's own recursion limit
    expected: list = []
    for _ in range(63):
        expected = [expected]
    assert loads_json(b"[" * 64 + b"]" * 64) == expected  # exactly the cap


def test_check_depth_counts_containers_not_scalars():
    check_depth({"a": {"b": [1]}}, 3)
    with pytest.raises(InputRefused):
        check_depth({"a": {"b": [[1]]}}, 3)


@pytest.mark.parametrize("protocol", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_plain_data_pickles_of_every_protocol_load(protocol):
    data = {
        "segments": [{"address": 2**40, "total_size": 2**21, "blocks": [{"state": "active_allocated"}]}],
        "device_traces": [[{"action": "alloc", "size": 512, "frames": [{"filename": "x.py", "line": 3}]}]],
        "ratio": 0.5,
        "flag": True,
        "none": None,
        "pair": (1, 2),
    }
    assert loads_pickle(pickle.dumps(data, protocol=protocol)) == data


def test_a_pickle_that_names_a_class_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    evil = f"cos\nsystem\n(S'touch {marker}'\ntR.".encode()
    with pytest.raises(InputRefused, match="names the class os.system"):
        loads_pickle(evil)
    assert not marker.exists()
    with pytest.raises(InputRefused, match="class collections.OrderedDict"):
        loads_pickle(pickle.dumps(collections.OrderedDict(a=1)))


def test_truncated_and_garbage_pickles_are_refused_with_a_reason():
    whole = pickle.dumps({"a": list(range(100))}, protocol=4)
    for bad in (whole[: len(whole) // 2], b"\x80\x04garbage", b""):
        with pytest.raises(InputRefused, match="pickle|refused"):
            loads_pickle(bad)


def test_streams_are_read_like_paths():
    assert read_input(io.BytesIO(gzip.compress(b"abc")), 100) == b"abc"


def test_streamed_pickle_is_bounded_refuses_classes_and_truncation(tmp_path):
    """The streaming reader (memory snapshots of 1 GB): same refusals as loads_pickle, the cap counted as it reads."""
    from core.intake import open_input
    from core.pickle_stream import load_pickle_stream

    def stream_load(data: bytes, limit: int = 10**6, **kwargs):
        path = tmp_path / "p"
        path.write_bytes(data)
        with open_input(path) as stream:
            return load_pickle_stream(stream, limit, what="snapshot", **kwargs)

    value = {"a": [1, 2.5, "x", None, (3, 4)], "b": list(range(5000))}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert stream_load(pickle.dumps(value, protocol)) == value
    assert stream_load(gzip.compress(pickle.dumps(value))) == value
    with pytest.raises(InputRefused, match="names the class posix.system"):
        stream_load(pickle.dumps({"x": os.system}))
    with pytest.raises(InputRefused, match="truncated"):
        stream_load(pickle.dumps(value)[:-40])
    with pytest.raises(InputRefused, match="larger than the 1000 B limit"):
        stream_load(pickle.dumps(value), limit=1000)
    # a string that claims 4 GiB: refused by the opcode check before the unpickler allocates it
    with pytest.raises(InputRefused, match="4,294,967,296 bytes at offset 2, over the 256 MiB limit on one object"):
        stream_load(b"\x80\x04\x8d" + (4 * 2**30).to_bytes(8, "little") + b"x" * 20_000, limit=10**4)
    # one that claims 100 MiB (under that limit): refused at the byte cap, never allocated
    with pytest.raises(InputRefused, match="larger than"):
        stream_load(b"\x80\x04\x8d" + (100 * 2**20).to_bytes(8, "little") + b"x" * 20_000, limit=10**4)
    seen = []
    stream_load(pickle.dumps(value), on_chunk=lambda unpickler: seen.append(len(unpickler.memo.copy())))
    assert seen  # the caller is called back while the structure is built
