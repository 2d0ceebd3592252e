"""The autocast dtype map: one chart per model, a cell per module and field, coloured by the dtype it holds
(one dtype: its level; several: mixed; none: blank)."""

import pytest

pytest.importorskip("plotly")

from render.plots.autocast import FIELDS, figures
from tests.factories import make_run


def _row(model, mode, module, **dtypes):
    return {"model": model, "autocast": mode, "module": module, "status": "ok"} | dict.fromkeys(FIELDS, "") | dtypes


def test_one_map_per_model_with_a_level_per_cell():
    rows = [
        _row("toy", "off", "fc1", input_dtypes="fp32", output_dtype="fp32"),
        _row("toy", "bf16", "fc1", input_dtypes="fp32, bf16", output_dtype="bf16"),
        _row("block", "off", "attn", input_dtypes="none"),
    ]
    toy, block = figures(make_run("autocast", rows))
    assert (toy.name, block.name) == ("autocast-toy", "autocast-block")
    (heat,) = toy.figure.data
    assert list(heat.y) == ["fc1"] and len(heat.x) == 2 * len(FIELDS)  # two modes × five fields
    assert heat.x[0] == "off · input" and heat.x[len(FIELDS)] == "bf16 · input"
    # levels ("", fp32, bf16, fp16, mixed): off → fp32, fp32; bf16 → two dtypes (mixed), bf16
    assert [heat.z[0][i] for i in (0, 1, len(FIELDS), len(FIELDS) + 1)] == [1, 1, 4, 2]
    assert block.figure.data[0].z[0][0] == 0  # "none" is no dtype: a blank cell
