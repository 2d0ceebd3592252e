"""Runs files between boxes: a lossless round trip, idempotent imports, and refusals that change nothing."""

import dataclasses
import json
import math
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cli import main
from core.result import RunResult
from core.store import EXPORT_FORMAT, ImportRefused, RunStore, parse_runs_file

GPU = {
    "kind": "cuda",
    "index": 0,
    "torch_device": "cuda:0",
    "name": "NVIDIA H100 80GB HBM3",
    "label": "cuda:0 — NVIDIA H100 80GB HBM3",
    "total_memory_bytes": 85_000_000_000,
    "spec": {"name": "H100 SXM", "tflops": {"bf16": 989.4}},
}
CPU = {"kind": "cpu", "name": "Intel(R) Xeon(R)", "label": "CPU — Intel(R) Xeon(R)", "spec": None}


def sample_runs() -> list[RunResult]:
    """Runs that exercise every field: statuses, non-finite values, unicode, nesting, labels."""
    runs = [
        RunResult(
            "matmul",
            {"dtype": "bf16", "sizes": [256, 512]},
            GPU,
            {"torch": "2.5.0", "cuda": "12.4"},
            "2026-01-02T03:04:05.678+00:00",
            "2026-01-02T03:05:00.000+00:00",
            "ok",
            rows=[
                {"size": 256, "tflops": 101.5, "samples_ms": [0.1, 0.2]},
                {"size": 512, "tflops": "inf", "note": "überlauf ✓"},
            ],
            meta={"nested": {"a": [1, {"b": None}]}},
            name="H100 baseline",
            tags=["h100", "bf16"],
        ),
        RunResult(
            "number-formats",
            {"dtype": "fp16"},
            CPU,
            {"torch": "2.13.0", "cuda": None},
            "2026-01-03T00:00:00+00:00",
            None,
            "cancelled",
            rows=[{"value": "nan", "ok": True}],
        ),
        RunResult(
            "probe",
            {"mode": "raise"},
            CPU,
            {},
            "2026-01-04T00:00:00+00:00",
            "2026-01-04T00:00:01+00:00",
            "error",
            error="probe raised on purpose",
        ),
        RunResult(
            "matmul",
            {"dtype": "fp8"},
            CPU,
            {},
            "2026-01-05T00:00:00+00:00",
            "2026-01-05T00:00:00.5+00:00",
            "unsupported",
            error="unsupported on CPU: no fp8 units",
        ),
    ]
    for i, run in enumerate(runs):
        run.id = f"a1b2c3d4e5f6{i:04d}"  # fixed, so two calls describe the same runs
    return runs


@pytest.fixture
def seeded(store):
    for run in sample_runs():
        store.save(run)
    return store


def snapshot(store: RunStore) -> list[dict]:
    return store.export_data()["runs"]


def test_round_trip_keeps_every_field_but_the_imported_mark(seeded, tmp_path):
    other = RunStore(tmp_path / "other.sqlite")
    assert other.import_bytes(seeded.export_json().encode()) == (4, 0)
    originals = {r.id: r for r in sample_runs()}
    assert {r.id for r in other.list()} == set(originals)
    for run_id, original in originals.items():
        copy = other.get(run_id)
        assert copy.imported is True
        theirs, ours = copy.to_dict(), original.to_dict()
        theirs.pop("imported"), ours.pop("imported")
        assert theirs == ours
    matmul = other.get(sample_runs()[0].id).frame()
    assert math.isinf(matmul["tflops"][1]) and matmul["samples_ms"][0] == [0.1, 0.2]


def test_importing_the_same_file_twice_adds_nothing(seeded, tmp_path):
    path = tmp_path / "runs.json"
    path.write_text(seeded.export_json(), encoding="utf-8")
    other = RunStore(tmp_path / "other.sqlite")
    assert other.import_file(path) == (4, 0)
    before = snapshot(other)
    assert other.import_file(path) == (0, 4)
    assert other.count() == 4 and snapshot(other) == before


def test_imported_run_keeps_its_local_label_on_reimport(seeded, tmp_path):
    """A re-import never overwrites what the user did to a run here (a rename, tags)."""
    raw = seeded.export_json().encode()
    other = RunStore(tmp_path / "other.sqlite")
    other.import_bytes(raw)
    run_id = sample_runs()[0].id
    other.relabel(run_id, name="renamed here")
    other.import_bytes(raw)
    assert other.get(run_id).name == "renamed here"


def test_cli_export_then_import(seeded, tmp_path, capsys):
    path = tmp_path / "cli-runs.json"
    assert main(["runs", "export", "-o", str(path)]) == 0
    db = tmp_path / "elsewhere.sqlite"
    assert main(["runs", "import", str(path), "--db", str(db)]) == 0
    assert "imported 4 runs; 0 already present" in capsys.readouterr().out
    assert RunStore(db).count() == 4


def _valid_file() -> dict:
    return {
        "format": EXPORT_FORMAT,
        "schema_version": 1,
        "exported_at": "2026-01-01T00:00:00+00:00",
        "runs": [r.to_dict() for r in sample_runs()],
    }


def _with(change) -> bytes:
    data = _valid_file()
    change(data)
    return json.dumps(data).encode()


HAND_MADE = {
    "empty file": b"",
    "whitespace": b"  \n",
    "not JSON": b"hello, world",
    "binary": bytes(range(256)),
    "JSON null": b"null",
    "JSON list": b"[]",
    "truncated": json.dumps(_valid_file()).encode()[:-1],
    "half a file": json.dumps(_valid_file()).encode()[:500],
    "NaN literal": json.dumps(_valid_file()).encode().replace(b'"inf"', b"NaN"),
    "deeply nested": b"[" * 100_000 + b"]" * 100_000,
    "other format": _with(lambda d: d.update(format="something-else")),
    "newer schema": _with(lambda d: d.update(schema_version=2)),
    "runs not a list": _with(lambda d: d.update(runs={"a": 1})),
    "run not an object": _with(lambda d: d["runs"].append("run")),
    "missing rows": _with(lambda d: d["runs"][1].pop("rows")),
    "unknown field": _with(lambda d: d["runs"][0].update(surprise=1)),
    "status unknown": _with(lambda d: d["runs"][0].update(status="great")),
    "still running": _with(lambda d: d["runs"][0].update(status="running")),
    "bad id": _with(lambda d: d["runs"][0].update(id="../../etc")),
    "bad date": _with(lambda d: d["runs"][0].update(started_at="yesterday")),
    "naive and aware dates": _with(lambda d: d["runs"][0].update(started_at="2026-01-02T03:04:05")),
    "row not an object": _with(lambda d: d["runs"][0]["rows"].append(3)),
    "tag not text": _with(lambda d: d["runs"][0].update(tags=["ok", 3])),
    "unpaired surrogate": json.dumps(_valid_file()).encode().replace(b"H100 baseline", b"H100 \\ud800"),
    "latin-1 text": json.dumps(_valid_file(), ensure_ascii=False)
    .encode("latin-1", "replace")
    .replace(b"H100 baseline", b"H100 \xe9"),
}
HAND_MADE |= {
    f"pickle protocol {p}": pickle.dumps(_valid_file(), protocol=p) for p in range(pickle.HIGHEST_PROTOCOL + 1)
}
HAND_MADE["pickled list"] = pickle.dumps(_valid_file()["runs"], protocol=0)


@pytest.mark.parametrize("case", HAND_MADE)
def test_bad_file_is_refused_and_changes_nothing(seeded, case):
    before = snapshot(seeded)
    with pytest.raises(ImportRefused) as refused:
        seeded.import_bytes(HAND_MADE[case])
    message = str(refused.value)
    assert message and "Traceback" not in message and len(message) < 400
    assert snapshot(seeded) == before


def test_pickle_is_named_as_such(store):
    with pytest.raises(ImportRefused, match="pickle"):
        store.import_bytes(pickle.dumps(_valid_file()))


def test_refused_file_from_disk_leaves_store_unchanged(seeded, tmp_path):
    path = tmp_path / "runs.pkl"
    path.write_bytes(pickle.dumps(_valid_file()))
    before = snapshot(seeded)
    with pytest.raises(ImportRefused):
        seeded.import_file(path)
    with pytest.raises(ImportRefused, match="cannot read"):
        seeded.import_file(tmp_path / "missing.json")
    assert snapshot(seeded) == before


# -- generated junk ----------------------------------------------------------------------------------

# The types each field accepts, written from the schema's documentation (not read from the code).
FIELD_TYPES = {
    "id": str,
    "experiment": str,
    "config": dict,
    "device": dict,
    "versions": dict,
    "started_at": str,
    "finished_at": (str, type(None)),
    "status": str,
    "error": (str, type(None)),
    "rows": list,
    "meta": dict,
    "name": str,
    "tags": list,
    "imported": bool,
    "schema_version": int,
    "error_kind": (str, type(None)),
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
JUNK = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _refused_without_change(store: RunStore, raw: bytes) -> None:
    before = snapshot(store)
    with pytest.raises(ImportRefused):
        store.import_bytes(raw)
    assert snapshot(store) == before


@JUNK
@given(raw=st.binary(max_size=2000))
def test_random_bytes_are_refused(seeded, raw):
    _refused_without_change(seeded, raw)


@JUNK
@given(value=json_values)
def test_random_json_is_refused(seeded, value):
    _refused_without_change(seeded, json.dumps(value).encode())


@JUNK
@given(cut=st.integers(min_value=0, max_value=10**6))
def test_any_truncation_is_refused(seeded, cut):
    raw = seeded.export_json().encode()
    _refused_without_change(seeded, raw[: cut % len(raw)])


@JUNK
@given(run_index=st.integers(0, 3), field=st.sampled_from(sorted(FIELD_TYPES)), value=json_values)
def test_a_wrongly_typed_field_is_refused(seeded, run_index, field, value):
    if isinstance(value, FIELD_TYPES[field]) and not (field == "imported" and not isinstance(value, bool)):
        value = [value]  # make it wrong: no field takes a list except rows and tags
        if field in ("rows", "tags"):
            value = {"not": "a list"}
    data = json.loads(seeded.export_json())
    data["runs"][run_index][field] = value
    _refused_without_change(seeded, json.dumps(data).encode())


@JUNK
@given(
    run_index=st.integers(0, 3),
    field=st.sampled_from(["id", "experiment", "config", "device", "versions", "started_at", "status", "rows"]),
)
def test_a_missing_required_field_is_refused(seeded, run_index, field):
    data = json.loads(seeded.export_json())
    del data["runs"][run_index][field]
    _refused_without_change(seeded, json.dumps(data).encode())


def test_a_single_run_json_is_accepted(store):
    """What `python -m core <exp> --json` prints is a one-run file."""
    run = sample_runs()[0]
    assert [r.id for r in parse_runs_file(json.dumps(run.to_dict()).encode())] == [run.id]


# -- careless and hostile files (issue 15) ------------------------------------------------------------


def _sample_file(change=None) -> bytes:
    data = _valid_file()
    if change:
        change(data)
    return json.dumps(data).encode()


@pytest.mark.timeout(300)  # reading /dev/zero to its end never ends: the limit fails that, not a clock
def test_dev_zero_is_refused_and_changes_nothing(seeded, capsys):
    """Finding 2: /dev/zero reports size 0; only counting the bytes read can stop it."""
    before = snapshot(seeded)
    assert main(["runs", "import", "/dev/zero"]) == 2
    err = capsys.readouterr().err
    assert "import refused" in err and "larger than the 256 MiB limit" in err
    assert snapshot(seeded) == before


def test_a_fifo_is_read_through_the_same_bound(seeded, tmp_path, monkeypatch):
    import os
    import threading

    from core import store as store_module

    monkeypatch.setattr(store_module, "MAX_IMPORT_BYTES", 4096)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as fh:
            try:
                fh.write(b" " * 100_000)
            except BrokenPipeError:
                pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    with pytest.raises(ImportRefused, match="larger than the 4 KiB limit"):
        seeded.import_file(fifo)
    writer.join(5)


# Values the lab's own code reads from an imported run, wrongly typed (finding 3). Each must be refused
# whole, before anything is stored; the expected types come from core.hardware.device's description.
WRONG_TYPES = {
    "device.name int": lambda r: r["device"].update(name=5),
    "device.name list": lambda r: r["device"].update(name=["a"]),
    "device.kind dict": lambda r: r["device"].update(kind={"a": 1}),
    "device.label int": lambda r: r["device"].update(label=3),
    "device.total_memory_bytes text": lambda r: r["device"].update(total_memory_bytes="80 GB"),
    "device.l2_cache_bytes list": lambda r: r["device"].update(l2_cache_bytes=[1]),
    "device.multiprocessors bool": lambda r: r["device"].update(multiprocessors=True),
    "device.bf16_supported text": lambda r: r["device"].update(bf16_supported="yes"),
    "device.tf32 list": lambda r: r["device"].update(tf32=[1]),
    "device.spec text": lambda r: r["device"].update(spec="H100"),
    "device.spec.tflops list": lambda r: r["device"].update(spec={"name": "x", "tflops": [1]}),
    "device.spec.tflops value text": lambda r: r["device"].update(spec={"name": "x", "tflops": {"bf16": "fast"}}),
    "device.spec.name int": lambda r: r["device"].update(spec={"name": 1, "tflops": {}}),
    "versions value list": lambda r: r["versions"].update(torch=["2.5"]),
    "config value dict": lambda r: r["config"].update(dtype={"a": 1}),
    "config list of dicts": lambda r: r["config"].update(sizes=[{"a": 1}]),
    "experiment with a slash": lambda r: r.update(experiment="../../x"),
    "experiment empty": lambda r: r.update(experiment=""),
    "id in arabic digits": lambda r: r.update(id="١٢٣"),
    "name too long": lambda r: r.update(name="x" * 121),
    "name with an escape": lambda r: r.update(name="a\x1b[2Jb"),
    "name with a newline": lambda r: r.update(name="a\nb"),
    "tag too long": lambda r: r.update(tags=["x" * 121]),
    "too many tags": lambda r: r.update(tags=[f"t{i}" for i in range(33)]),
}


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_wrongly_typed_nested_fields_are_refused(seeded, case):
    _refused_without_change(seeded, _sample_file(lambda d: WRONG_TYPES[case](d["runs"][0])))


def test_bad_type_import_exits_2_and_runs_list_still_works(seeded, tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_bytes(_sample_file(lambda d: d["runs"][0]["device"].update(name=5)))
    assert main(["runs", "import", str(path)]) == 2
    assert "device.name" in capsys.readouterr().err
    assert main(["runs", "list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4


def test_900_levels_of_meta_are_refused_without_a_traceback(seeded, tmp_path, capsys):
    """Finding 4: json.loads copes with 900 levels, every recursive consumer after it does not."""
    deep: object = 1
    for _ in range(900):
        deep = {"a": deep}
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(_valid_file() | {"runs": [sample_runs()[0].to_dict() | {"meta": deep}]}))
    assert main(["runs", "import", str(path)]) == 2
    err = capsys.readouterr().err
    assert "nests deeper than" in err and "Traceback" not in err
    assert main(["runs", "list"]) == 0


def test_schema_version_true_is_not_1(seeded):
    """Finding 15: True == 1 in Python; a JSON boolean is not a version number."""
    _refused_without_change(seeded, _sample_file(lambda d: d.update(schema_version=True)))
    _refused_without_change(seeded, _sample_file(lambda d: d["runs"][0].update(schema_version=True)))


def test_duplicate_ids_in_one_file_are_refused_by_name(seeded):
    """Finding 15: two runs with one id in a file is a broken file, not something to drop silently."""

    def twice(d):
        d["runs"].append(dict(d["runs"][0], name="the other one"))

    with pytest.raises(ImportRefused, match="run 5 of 5 has the same id as run 1"):
        seeded.import_bytes(_sample_file(twice))


def test_refusals_quote_hostile_fields_briefly(seeded):
    with pytest.raises(ImportRefused) as refused:
        seeded.import_bytes(_sample_file(lambda d: d.update(format="x" * 5_000_000)))
    assert len(str(refused.value)) < 400


def test_an_export_near_the_limit_imports_back(monkeypatch, tmp_path):
    """Finding 5: an import just under the limit re-exported larger than the limit (indented JSON)."""
    from core import store as store_module

    monkeypatch.setattr(store_module, "MAX_IMPORT_BYTES", 64 * 1024)
    first = RunStore(tmp_path / "a.sqlite")
    run = sample_runs()[0]
    run.rows = [{"size": i, "tflops": i * 1.5, "dtype": "bf16"} for i in range(1200)]
    raw = json.dumps(
        {"format": EXPORT_FORMAT, "schema_version": 1, "runs": [run.to_dict()]}, separators=(",", ":")
    ).encode()
    assert 48 * 1024 < len(raw) < 64 * 1024
    assert first.import_bytes(raw) == (1, 0)
    again = first.export_json().encode()
    assert len(again) <= 64 * 1024
    assert RunStore(tmp_path / "b.sqlite").import_bytes(again) == (1, 0)


def test_an_export_beyond_the_import_limit_is_refused_with_the_sizes(monkeypatch, seeded, tmp_path, capsys):
    from core import store as store_module
    from core.store import ExportTooLarge

    monkeypatch.setattr(store_module, "MAX_IMPORT_BYTES", 512)
    with pytest.raises(ExportTooLarge, match="import limit"):
        seeded.export_json()
    assert main(["runs", "export", "-o", str(tmp_path / "x.json")]) == 2
    assert "import limit" in capsys.readouterr().err and not (tmp_path / "x.json").exists()


def test_a_run_left_running_is_exported_as_interrupted_and_imports_back(seeded, tmp_path):
    """Finding 5: a run left 'running' (CLI killed) made every full export refuse everything."""
    stuck = sample_runs()[0]
    stuck.id, stuck.status, stuck.finished_at = "deadbeef0001", "running", None
    seeded.save(stuck, owner_pid=2**22 + 4321)  # no such process
    live = sample_runs()[1]
    live.id, live.status, live.finished_at = "deadbeef0002", "running", None
    import os

    seeded.save(live, owner_pid=os.getpid())
    data = json.loads(seeded.export_json())
    statuses = {r["id"]: r["status"] for r in data["runs"]}
    assert statuses["deadbeef0001"] == "interrupted" and statuses["deadbeef0002"] == "interrupted"
    other = RunStore(tmp_path / "other.sqlite")
    assert other.import_bytes(json.dumps(data).encode()) == (6, 0)
    assert "still running when it was exported" in other.get("deadbeef0002").error
    assert seeded.get("deadbeef0002").status == "running"  # exporting changes nothing here


def write_runs_bomb(path, runs: int) -> None:
    """Issue 32's runs file: ``{"format":"x","runs":[`` + ``runs`` × ``{},`` + ``{}]}``, gzipped as it is written."""
    import gzip

    block = b"{}," * 1_000_000
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(b'{"format":"x","runs":[')
        for _ in range(runs // 1_000_000):
            out.write(block)
        out.write(b"{}," * (runs % 1_000_000) + b"{}]}")


def test_a_small_gzip_of_85_million_runs_is_refused_unread_within_500_mib(seeded, tmp_path, monkeypatch):
    """Issue 32, hole 1: 242 KiB of gzip made 85 M ``{}`` and took the import past 4 GiB. Its objects are counted
    as it is inflated, a chunk at a time, and the file refused before any is made (the inflate ratio, which refuses
    it first, raised here past what it inflates to)."""
    from core.limits import LIMITS, LIMITS_ENV
    from tests.core.workload.test_hostile_files import bounded_cli

    monkeypatch.setenv(LIMITS_ENV, "inflate_ratio=10000")
    path = tmp_path / "runs.json.gz"
    write_runs_bomb(path, 85_000_000)
    assert path.stat().st_size < 1 << 20
    before = snapshot(seeded)
    out = bounded_cli("runs", "import", str(path), rss_bytes=500 << 20)
    assert out.code == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "runs.json.gz: the runs file holds 85,000,003 JSON objects and lists, more than the " in out.stderr
    assert f"{LIMITS.runs_file_containers:,} limit" in out.stderr
    assert snapshot(seeded) == before


def test_the_objects_of_a_plain_runs_file_are_counted_before_decoding(seeded, monkeypatch):
    from core import store as store_module
    from core.limits import LIMITS

    monkeypatch.setattr(store_module, "LIMITS", dataclasses.replace(LIMITS, runs_file_containers=1_000))
    before = snapshot(seeded)
    with pytest.raises(ImportRefused, match=r"holds 1,002 JSON objects and lists, more than the 1,000 limit"):
        seeded.import_bytes(b'{"format":"x","runs":[' + b"{}," * 999 + b"{}]}")
    assert snapshot(seeded) == before


def test_more_runs_than_the_limit_are_refused_naming_it(seeded, monkeypatch):
    from core import store as store_module
    from core.limits import LIMITS

    raw = seeded.export_json().encode()
    held = len(json.loads(raw)["runs"])
    monkeypatch.setattr(store_module, "LIMITS", dataclasses.replace(LIMITS, runs_per_file=held - 1))
    with pytest.raises(ImportRefused, match=rf"^{held} runs exceed the {held - 1}-run limit$"):
        RunStore(seeded.path.parent / "other.sqlite").import_bytes(raw)
    monkeypatch.setattr(store_module, "LIMITS", dataclasses.replace(LIMITS, runs_per_file=held))
    assert RunStore(seeded.path.parent / "other.sqlite").import_bytes(raw) == (held, 0)
