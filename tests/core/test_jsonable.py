"""json_ready: what the worker sends, the store keeps and the exports write is strict JSON, whatever type carried
each value (plain floats, numpy's, a float subclass, read-only mappings, tuples, non-string keys)."""

from __future__ import annotations

import json
import math
from types import MappingProxyType

import numpy as np

from core.jsonable import json_ready


class _Share(float):
    pass


def test_non_finite_floats_become_strings_whatever_their_type():
    for nan in (math.nan, np.float64("nan"), _Share("nan")):
        assert json_ready(nan) == "nan"
    assert [json_ready(v) for v in (math.inf, -math.inf, np.float64("-inf"), _Share("inf"))] == [
        "inf",
        "-inf",
        "-inf",
        "inf",
    ]


def test_finite_values_and_their_types_are_kept():
    for value in (0.0, -0.0, 1e-300, 1.5, np.float64(2.5), 7, True, None, "x", np.float32(1.5)):
        out = json_ready(value)
        assert out is value
    assert math.copysign(1.0, json_ready(-0.0)) == -1.0


def test_containers_become_lists_and_string_keyed_dicts():
    value = {3: (2.0, [math.nan]), True: MappingProxyType({"k": (math.inf,)}), None: {2.5: -math.inf}}
    out = json_ready(value)
    assert out == {"3": [2.0, ["nan"]], "True": {"k": ["inf"]}, "None": {"2.5": "-inf"}}
    assert type(out["True"]) is dict
    json.dumps(out, allow_nan=False)  # strict JSON
