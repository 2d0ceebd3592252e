"""A chart as every renderer hands it on: a name, the Plotly figure and the data its export holds."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from render.style import number_axes


@dataclass
class Chart:
    name: str  # file name stem and widget key, e.g. "matmul-tflops"
    figure: go.Figure
    data: pd.DataFrame | None = None  # what the CSV/JSON export holds

    def __post_init__(self) -> None:
        number_axes(self.figure)  # one way to write an axis's numbers, whoever built the figure
