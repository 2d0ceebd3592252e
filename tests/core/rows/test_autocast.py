"""An ``autocast`` run's rows (:mod:`core.rows.autocast`): both stored forms round-trip with their keys in order, and
the dtype map reads the fields."""

from __future__ import annotations

from core.result import RunResult
from core.rows.autocast import ModuleDtypes

# the toy model's first Linear under bf16 autocast on a CPU, as the engine stored it before the row had a type
LINEAR = {"model": "toy", "autocast": "bf16", "module": "fc1", "type": "Linear", "input_dtypes": "fp32",
          "output_dtype": "bf16", "param_dtypes": "fp32, fp32", "grad_dtypes": "fp32, fp32",
          "grad_output_dtypes": "bf16", "model_output_dtype": "bf16", "status": "ok"}  # fmt: skip
NO_FP16 = {"model": "toy", "autocast": "bf16", "module": "(model)", "status": "unsupported",
           "reason": "torch.cuda.is_bf16_supported() is False"}  # fmt: skip


def test_both_stored_forms_round_trip_with_their_keys_in_order():
    for row in (LINEAR, NO_FP16, LINEAR | {"gpu": 2}):
        back = ModuleDtypes.from_row(row).to_row()
        assert back == row and list(back) == list(row)


def test_the_dtype_map_reads_the_fields():
    from render.plots.autocast import dtype_map

    def cells(rows: list[dict]) -> list:
        run = RunResult("autocast", {}, {"kind": "cpu", "name": "cpu"}, {}, "t", None, "ok", rows=rows)
        return list(dtype_map(run, "toy").figure.data[0].text[0])

    # the first row's input, output, params, grads and grad out, under its one mode; the unsupported row draws nothing
    assert cells([LINEAR, NO_FP16]) == ["fp32", "bf16", "fp32, fp32", "fp32, fp32", "bf16"]
    assert cells([LINEAR | {"output_dtype": "fp16"}])[1] == "fp16"
