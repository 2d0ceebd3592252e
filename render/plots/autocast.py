"""Chart of an ``autocast`` run: a dtype map, one cell per module and field, coloured by dtype."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
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
    df = run.frame()
    part: pd.DataFrame = df.loc[(df["model"] == model) & (df.get("status", "ok") == "ok")]
    modes = list(dict.fromkeys(part["autocast"]))
    modules = list(dict.fromkeys(part["module"]))
    columns = [(m, f) for m in modes for f in FIELDS]
    z, text = [], []
    for module in modules:
        zr, tr = [], []
        for mode, f in columns:
            cell = part.loc[(part["module"] == module) & (part["autocast"] == mode), f]
            value = str(cell.iloc[0]) if len(cell) and cell.iloc[0] == cell.iloc[0] else ""
            zr.append(_level(value))
            tr.append(value)
        z.append(zr)
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
    return Chart(f"autocast-{model}", fig, part)


def figures(run: RunResult) -> list[Chart]:
    df = run.frame()
    return [dtype_map(run, m) for m in dict.fromkeys(df["model"])]
