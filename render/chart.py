"""A chart as every renderer hands it on: a name, the Plotly figure and the data its export holds."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from render.style import number_axes


@dataclass
class Chart:
    name: str  # file name stem and widget key, e.g. "matmul-tflops"
    figure: go.Figure
    data: pd.DataFrame | None = None  # what the CSV/JSON export holds

    def __post_init__(self) -> None:
        number_axes(self.figure)  # one way to write an axis's numbers, whoever built the figure


def kind_rows(run: RunResult, kind: str) -> pd.DataFrame:
    """The rows of one ``kind`` of a run that mixes kinds, with only the columns that kind fills."""
    df = run.frame()
    if df.empty or "kind" not in df:
        return pd.DataFrame()
    return df.loc[df["kind"] == kind].dropna(axis=1, how="all").reset_index(drop=True)
