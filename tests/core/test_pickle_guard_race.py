"""The pickle guard reads what the unpickler reads (issue 32, hole 6): the file is opened once, and the guard
process checks that open file, never the path opened again. A symlink flipped between a benign pickle and one
only the guard refuses, while imports run, must never get the refused one read."""

from __future__ import annotations

import os
import pickle
import threading

from core import pickle_stream
from core.errors import InputRefused
from core.intake import open_input
from core.pickle_stream import load_pickle_stream

BENIGN = pickle.dumps({"ok": 1}, protocol=4)
# BINBYTES8 declaring 1 TiB: only the guard refuses it as such (the unpickler, reading what exists, finds the
# file truncated)
HOSTILE = b"\x80\x05\x8e" + (1 << 40).to_bytes(8, "little") + b"."
GUARDS_WORDS = "over the 256 MiB limit on one object"


def test_a_flipping_symlink_never_gets_the_hostile_file_past_the_guard(tmp_path, monkeypatch):
    monkeypatch.setattr(pickle_stream, "GUARD_PROCESS_BYTES", 0)  # the guard in a process of its own
    benign, hostile, link = tmp_path / "benign.pickle", tmp_path / "hostile.pickle", tmp_path / "snap.pickle"
    benign.write_bytes(BENIGN)
    hostile.write_bytes(HOSTILE)
    link.symlink_to(benign)
    stop = threading.Event()

    def flip() -> None:
        spare = tmp_path / "spare"
        while not stop.is_set():
            for target in (hostile, benign):
                spare.unlink(missing_ok=True)
                spare.symlink_to(target)
                os.replace(spare, link)  # atomic: the link always names one of the two

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    outcomes = []
    try:
        for _ in range(20):
            try:
                with open_input(link, "snapshot") as stream:
                    outcomes.append(load_pickle_stream(stream, 1 << 20, what="snapshot", path=link))
            except InputRefused as exc:
                outcomes.append(str(exc))
    finally:
        stop.set()
        flipper.join()
    for outcome in outcomes:
        assert outcome == {"ok": 1} or GUARDS_WORDS in str(outcome), outcome
