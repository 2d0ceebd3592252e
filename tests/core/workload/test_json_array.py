"""The elements of a JSON array found in its bytes, however its chunks fall: every boundary a chunk cuts (inside a
string, a run of backslashes, an escaped quote, a nested object) is carried to the next, so the elements are the
ones ``json.loads`` reads, for any chunk size."""

import gzip
import json

import pytest

from core.workload.trace import json_array
from tests.conftest import ROOT

TRACE = ROOT / "tests" / "data" / "workload" / "hta_a100_event_sync.json.gz"
TRICKY = [{"name": 'a "quoted" [name], {x}', "args": {"path": "C:\\dir\\", "q": '\\\\"]'}}, [1, [2, {}]], "}", 3]


def _elements(text: bytes) -> list:
    start, out = 0, []
    for first, ends in json_array.batches(text, max_items=7, max_bytes=1 << 20):
        bounds = [first, *ends.tolist()]
        out += [json.loads(text[a + 1 : b]) for a, b in zip(bounds, bounds[1:], strict=False)]
        start = bounds[-1]
    assert text[start : start + 1] == b"]"
    return out


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 4096, 1 << 19])
def test_elements_are_json_loads_ones_for_any_chunk(monkeypatch, chunk):
    monkeypatch.setattr(json_array, "SCAN_BYTES", chunk)
    events = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    text = json.dumps(events + TRICKY).encode()
    assert _elements(text) == events + TRICKY
