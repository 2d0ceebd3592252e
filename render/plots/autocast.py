"""Chart of an ``autocast`` run: a dtype map, one cell per module and field, coloured by dtype."""

from __future__ import annotations

import plotly.graph_objects as go

from core.result import RunResult
from core.rows.autocast import ModuleDtypes
from render.chart import Chart
from render.style import color_for, style, title

FIELDS = {
    "input_dtypes": "input",
    "output_dtype": "output",
    "param_dtypes": "params",
    "grad_dtypes": "param grads",
    "grad_output_dtypes": "grad out",
}
LEVELS = ("", "fp32", "bf16", "fp16", "mixed")


def _level(text: str) -> int:
    kinds = {t.strip() for t in str(text or "").split(",") if t.strip() and t.strip() != "none"}
    if not kinds:
        return 0
    return LEVELS.index(kinds.pop()) if len(kinds) == 1 and next(iter(kinds), None) in LEVELS else 4


def dtype_map(run: RunResult, model: str) -> Chart:
    rows = ModuleDtypes.from_run(run)
    picked = [i for i, r in enumerate(rows) if r.model == model and r.ok]
    mine = [rows[i] for i in picked]
    modes = list(dict.fromkeys(r.autocast for r in mine))
    modules = list(dict.fromkeys(r.module for r in mine))
    cells: dict[tuple[str, str], ModuleDtypes] = {}
    for r in mine:
        cells.setdefault((r.module, r.autocast), r)  # a module seen twice: its first row
    columns = [(m, f) for m in modes for f in FIELDS]
    z, text = [], []
    for module in modules:
        tr = [getattr(cells[module, mode], f) if (module, mode) in cells else "" for mode, f in columns]
        z.append([_level(value) for value in tr])
        text.append(tr)
    colors = ["#ffffff", color_for("fp32"), color_for("bf16"), color_for("fp16"), "#bcbd22"]
    scale = [[i / (len(colors) - 1), c] for i, c in enumerate(colors)]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[f"{m} · {FIELDS[f]}" for m, f in columns],
            y=modules,
            text=text,
            texttemplate="%{text}",
            colorscale=scale,
            zmin=0,
            zmax=len(colors) - 1,
            showscale=False,
            xgap=2,
            ygap=2,
            hovertemplate="%{y} · %{x}: %{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    style(
        fig,
        title(f"Autocast dtype map: {model}", run, "columns: autocast mode · what the hooks saw"),
        "autocast mode · field",
        "module",
        height=max(320, 40 * len(modules) + 160),
    )
    return Chart(f"autocast-{model}", fig, run.frame().iloc[picked])


def figures(run: RunResult) -> list[Chart]:
    return [dtype_map(run, m) for m in dict.fromkeys(r.model for r in ModuleDtypes.from_run(run))]
