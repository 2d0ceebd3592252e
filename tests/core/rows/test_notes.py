"""What any run's meta says beside its rows, read one way: each key as stored, a key of the wrong type read as
absent; and a shipped example's provenance with its GPU, notes and rank files."""

from core.rows.notes import RunNotes
from core.rows.provenance import Provenance
from core.workload.examples import find, provenance


def test_every_note_reads_as_stored_and_a_wrong_type_as_absent():
    said = RunNotes.from_meta(
        {
            "measurement_errors": ["fp16 4096³ above the datasheet peak"],
            "store_error": "disk full",
            "byte_columns": ["bytes", "peak_bytes"],
            "quirks": {"events without a timestamp": 3},
            "run_ids": ["a1", "b2"],
            "added": 4,
            "already_present": 1,
        }
    )
    assert said == RunNotes(
        ("fp16 4096³ above the datasheet peak",),
        "disk full",
        frozenset({"bytes", "peak_bytes"}),
        {"events without a timestamp": 3},
        ("a1", "b2"),
        4,
        1,
    )
    assert said.quirk_lines() == ["quirk: 3 × events without a timestamp"]
    junk = {"measurement_errors": "x", "store_error": "", "quirks": [1], "run_ids": None, "added": True}
    assert RunNotes.from_meta(junk) == RunNotes() == RunNotes.from_meta({})


def test_a_shipped_rank_set_s_provenance_names_its_gpu_notes_and_rank_files():
    example = find("recsys-a100-ranks")
    read = Provenance.from_meta({"example": provenance(example)}).example
    assert read is not None
    assert (read.gpu, read.notes, read.ranks) == (example.gpu, example.notes, ("rank-0.json.gz", "rank-1.json.gz"))
    assert read.label == f"recorded elsewhere on {example.gpu} ({example.repository})"
