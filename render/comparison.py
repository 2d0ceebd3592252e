"""Comparing stored runs of one experiment, for any experiment: pure pandas and Plotly.

Experiments only agree on the :class:`~core.result.RunResult` schema, so the generic comparison
reads the rows' columns: integer and text columns without a unit are *keys* (the sweep: size,
dtype, step), numbers with a unit or float values are *metrics* (``median_ms``, ``tflops``,
``peak_bytes``). The compare page and the HTML report both use it; a plot module's own
``overlay(runs)`` replaces :func:`generic_overlay` where it exists.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core import columns
from core.columns import headline_metric, split_columns, tokens
from core.hardware.specs import datasheet_peaks, unit_for
from core.result import RunResult, RunSummary
from render.chart import Chart
from render.style import DTYPE_COLORS, color_for, html_text, style, title

# Line styles tell runs apart when colour already means dtype.
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
RUN_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


# -- columns -----------------------------------------------------------------------------------------


def _common(runs: list[RunResult]) -> tuple[list[pd.DataFrame], list[str], list[str]]:
    frames = [r.frame() for r in runs]
    split = [split_columns(f) for f in frames]
    keys = [c for c in split[0][0] if all(c in s[0] for s in split[1:])]
    metrics = [c for c in split[0][1] if all(c in s[1] for s in split[1:])]
    return frames, keys, metrics


def x_column(df: pd.DataFrame, keys: list[str]) -> str | None:
    """The sweep axis: the first numeric key (size, step, batch), if any."""
    return next(
        (k for k in keys if pd.api.types.is_numeric_dtype(df[k]) and not pd.api.types.is_bool_dtype(df[k])), None
    )


def headline(run: RunResult) -> str:
    """E.g. 'max TFLOPS 312.4' — the one-number summary of a run (the store keeps it in the run's summary)."""
    return columns.headline(run.rows, run.device_info.is_cuda, run.experiment)


def settings_text(config: dict, limit: int = 90) -> str:
    text = ", ".join(f"{k}={value_text(v)}" for k, v in config.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def value_text(value) -> str:
    """A setting as a label shows it; an empty one (no list, no string) reads "(none)", never a bare "x="."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "(none)"
    return str(value) if value != "" else "(none)"


# -- what differs ------------------------------------------------------------------------------------


def device_text(run: RunResult | RunSummary) -> str:
    if run.recorded_elsewhere:
        return f"imported ({run.recorded_elsewhere})"
    device = run.device_info  # a name is required of every stored device (core.result.schema_problem)
    return "CPU" if device.is_cpu else device.name


def differences(runs: list[RunResult]) -> list[str]:
    """Names of what differs between the runs: 'device', then config fields, then 'torch'."""
    out = []
    if len({(r.device_info.kind, r.device_info.name) for r in runs}) > 1:
        out.append("device")
    keys = list(dict.fromkeys(k for r in runs for k in r.config))
    out += [k for k in keys if len({value_text(r.config.get(k)) for r in runs}) > 1]
    if len({r.versions.get("torch") for r in runs}) > 1:
        out.append("torch")
    return out


def labels(runs: list[RunResult]) -> list[str]:
    """One legend label per run naming what differs (unique; the run's name or id when nothing does)."""
    differ = differences(runs)

    def part(run: RunResult, key: str) -> str:
        if key == "device":
            return device_text(run)
        if key == "torch":
            return f"torch {run.versions.get('torch')}"
        return f"{key}={value_text(run.config.get(key))}"

    out = [" · ".join(part(r, k) for k in differ) or (r.name or f"run {r.id[:6]}") for r in runs]
    for i, (run, label) in enumerate(zip(runs, out)):
        if out.count(label) > 1:
            out[i] = f"{label} ({run.name or run.id[:6]})"
    return out


def compare_problem(runs: list[RunResult]) -> str | None:
    """Why these runs cannot share a chart, or None when they can."""
    if len(runs) < 2:
        return "pick at least two runs to compare"
    experiments = sorted({r.experiment for r in runs})
    if len(experiments) > 1:
        return f"runs of different experiments cannot share a chart: {', '.join(experiments)}"
    empty = [r for r in runs if not r.rows]
    if empty:
        return "; ".join(f"run {r.id[:8]} ({r.status}) has no measured rows" for r in empty)
    fields = [set(r.config) for r in runs]
    if any(f != fields[0] for f in fields[1:]):
        odd = sorted(set.union(*fields) - set.intersection(*fields))
        return (
            f"incompatible settings: field(s) {', '.join(odd)} exist in only some runs "
            f"(made by different GPU Lab versions?)"
        )
    _, _, metrics = _common(runs)
    if not metrics:
        return "the runs share no measured column to compare"
    return None


def common_metrics(runs: list[RunResult]) -> list[str]:
    return _common(runs)[2]


def default_metric(runs: list[RunResult]) -> str:
    """The shared metric a comparison starts with (call after :func:`compare_problem` said yes)."""
    chosen = headline_metric(common_metrics(runs))
    if chosen is None:
        raise ValueError("the runs share no measured column")
    return chosen[0]


# -- percent of datasheet peak ------------------------------------------------------------------------


def is_throughput(metric: str) -> bool:
    return bool(tokens(metric) & columns.THROUGHPUT_TOKENS)


def row_peaks(run: RunResult, df: pd.DataFrame) -> pd.Series | None:
    """Each row's datasheet dense peak (TFLOPS) for its dtype on the run's *own* device; None without a sheet."""
    peaks = datasheet_peaks(run.device)
    if not peaks:
        return None
    dtypes = (
        df.loc[:, "dtype"] if "dtype" in df.columns else pd.Series([run.config.get("dtype")] * len(df), index=df.index)
    )
    return dtypes.map(lambda d: peaks.get(unit_for(str(d))) if d else None).astype(float)


def without_peak(runs: list[RunResult]) -> list[str]:
    """Legend labels of the runs that have no datasheet entry (CPUs, unknown GPUs)."""
    return [label for run, label in zip(runs, labels(runs)) if not datasheet_peaks(run.device)]


# -- charts and tables -------------------------------------------------------------------------------


def _overlay_traces(
    fig: go.Figure, df: pd.DataFrame, i: int, name: str, x: str | None, groups: list[str], metric: str
) -> None:
    """One run's lines: a trace per value of the dtype-like keys, coloured by dtype where the key is one (dashed per
    run), else by run."""
    for key, sub in df.groupby(groups, sort=False, dropna=False) if groups else [((), df)]:
        group = key if isinstance(key, tuple) else (key,)
        only = group[0] if len(group) == 1 else None
        dtype_like = only in DTYPE_COLORS
        colour = color_for(str(only)) if dtype_like else RUN_COLORS[i % len(RUN_COLORS)]
        fig.add_trace(
            go.Scatter(
                x=sub[x] if x else list(range(len(sub))),
                y=pd.to_numeric(sub[metric], errors="coerce"),
                mode="lines+markers",
                name=html_text(" · ".join([name, *map(str, group)])),
                line=dict(color=colour, dash=DASHES[i % len(DASHES)] if dtype_like else "solid"),
            )
        )


def _log_x(frames: list[pd.DataFrame], x: str | None) -> bool:
    """A sweep over two decades or more is drawn on a log axis."""
    xs = pd.concat([pd.Series(pd.to_numeric(f[x], errors="coerce")) for f in frames]).dropna() if x else pd.Series([])
    return bool(len(xs)) and xs.min() > 0 and xs.max() / xs.min() >= 100


def generic_overlay(runs: list[RunResult], metric: str | None = None, percent_of_peak: bool = False) -> Chart:
    """All runs' ``metric`` on one chart: x is the sweep key, one trace per run (and per dtype-like key).

    With ``percent_of_peak`` a throughput is drawn as percent of each run's own device datasheet peak
    for the row's dtype; runs without a datasheet entry are left out and named in the title.
    """
    frames, keys, metrics = _common(runs)
    metric = metric or default_metric(runs)
    if metric not in metrics:
        raise ValueError(f"{metric!r} is not a measured column shared by these runs ({', '.join(metrics)})")
    x = x_column(frames[0], keys)
    groups = [k for k in keys if k != x and not pd.api.types.is_numeric_dtype(frames[0][k])][:2]
    if percent_of_peak and not is_throughput(metric):
        raise ValueError(f"{metric!r} is not a throughput; only TFLOPS/TOPS have a datasheet peak")
    fig = go.Figure()
    parts = []
    for i, (df, name) in enumerate(zip(frames, labels(runs))):
        df = df.assign(run=name, run_id=runs[i].id)
        if percent_of_peak:
            peaks = row_peaks(runs[i], df)
            if peaks is None:
                continue
            df = df.assign(peak_tflops=peaks, **{metric: pd.to_numeric(df[metric], errors="coerce") / peaks * 100})
        parts.append(df)
        _overlay_traces(fig, df, i, name, x, groups, metric)
    experiment = runs[0].experiment
    differ = differences(runs)
    detail = f"differs: {', '.join(differ)}" if differ else "same settings and device"
    y_title = metric
    if percent_of_peak:
        y_title = f"{metric} (% of own datasheet dense peak)"
        missing = without_peak(runs)
        detail += f" · no datasheet, not shown: {', '.join(missing)}" if missing else ""
    log_x = _log_x(frames, x)
    style(
        fig,
        title(f"{experiment}: {y_title}", None, detail),
        x or "point",
        y_title,
        legend_title="run",
        xaxis_type="log" if log_x else None,
    )
    suffix = "-pct-of-peak" if percent_of_peak else ""
    data = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return Chart(name=f"{experiment}-compare-{metric}{suffix}", figure=fig, data=data)


def generic_charts(runs: list[RunResult], metric: str | None = None) -> list[Chart]:
    """The absolute overlay, plus percent of each device's own datasheet peak for a throughput when any run
    has a datasheet entry (an H100 and an A100 sweep: who gets closer to its own peak?)."""
    metric = metric or default_metric(runs)
    absolute = generic_overlay(runs, metric)
    if is_throughput(metric) and len(without_peak(runs)) < len(runs):
        return [absolute, generic_overlay(runs, metric, percent_of_peak=True)]
    return [absolute]


# What makes two rows the same point, by experiment: the shape and dtype of a matmul, the step of an allocator
# run, the configuration and phase of a step benchmark. Elsewhere the key columns that vary inside a run do.
POINT_KEYS = {
    "matmul": ("dtype", "m", "n", "k"),
    "reference": ("dtype", "m", "n", "k", "round"),
    "matmul-soak": ("dtype", "size", "second"),
    "allocator": ("index", "step", "op"),
    "step-bench": ("kind", "model", "precision", "stack", "series", "step", "phase", "scope", "group", "name"),
    "estimate": ("moment", "phase"),
    "interconnect": ("kind", "direction", "memory", "collective", "bytes", "src", "dst"),
}


def pair_keys(runs: list[RunResult]) -> list[str]:
    """The columns rows are paired on: the experiment's point keys the runs share, else the shared key columns
    that vary inside a run (a column constant in each run, such as its device kind, describes the run, not a point;
    a yes/no column is a property of a point, not its name)."""
    frames, keys, _ = _common(runs)
    named = POINT_KEYS.get(runs[0].experiment)
    if named is not None:
        return [k for k in named if all(k in f.columns for f in frames)]
    return [
        k
        for k in keys
        if not pd.api.types.is_bool_dtype(frames[0][k]) and any(f[k].nunique(dropna=False) > 1 for f in frames)
    ]


def pairing_text(runs: list[RunResult], table: pd.DataFrame) -> str:
    """How the delta table paired the runs' rows, or that nothing paired and why."""
    keys = pair_keys(runs)
    if not keys:
        return "Nothing pairs: these runs' rows have no column that names a point (a shape, a step) to pair them on."
    by = ", ".join(keys)
    if table.empty:
        return f"Nothing pairs: no row of another run has the same {by} as a row of the baseline."
    pairs = len(table.drop_duplicates(subset=[*keys, "run"]))
    return f"Rows paired by {by}: {pairs:,} pair{'s' if pairs != 1 else ''} (medians where a point repeats)."


def delta_table(runs: list[RunResult], metrics: list[str] | None = None) -> pd.DataFrame:
    """Per metric and point, each run against the first: value, difference and ratio. Rows are paired on
    :func:`pair_keys` (median over repeats); a run with no row like the baseline's adds nothing (:func:`pairing_text`
    says so) — never a median of unlike rows."""
    frames, _, shared = _common(runs)
    keys = pair_keys(runs)
    metrics = [m for m in (metrics or shared) if m in shared and m not in keys]  # a point's name is no delta
    names = labels(runs)
    columns = keys + ["metric", "baseline", "run", "baseline value", "value", "difference", "ratio"]
    if not keys:
        return pd.DataFrame([], columns=columns)

    def reduce(df: pd.DataFrame) -> pd.DataFrame:
        values = df[keys + metrics].copy()
        for m in metrics:
            values[m] = pd.to_numeric(values[m], errors="coerce")
        return values.groupby(keys, dropna=False, sort=False)[metrics].median().reset_index()

    base = reduce(frames[0])
    out = []
    for name, df in zip(names[1:], frames[1:]):
        merged = base.merge(reduce(df), on=keys, suffixes=(" base", " run"))
        for row in merged.to_dict(orient="records"):
            for m in metrics:
                a, b = row[f"{m} base"], row[f"{m} run"]
                out.append(
                    {
                        **{k: row[k] for k in keys},
                        "metric": m,
                        "baseline": names[0],
                        "run": name,
                        "baseline value": a,
                        "value": b,
                        "difference": b - a,
                        "ratio": b / a if a not in (0, 0.0) and pd.notna(a) else float("nan"),
                    }
                )
    return pd.DataFrame(out, columns=columns)


def generic_figures(run: RunResult, limit: int = 6) -> list[Chart]:
    """For a run whose experiment has no plot module: one chart per metric (its own unit on its own axis)."""
    df = run.frame()
    keys, metrics = split_columns(df)
    x = x_column(df, keys)
    groups = [k for k in keys if k != x and not pd.api.types.is_numeric_dtype(df[k])][:1]
    charts = []
    for m in metrics[:limit]:
        fig = go.Figure()
        for i, (group, sub) in enumerate(df.groupby(groups, sort=False, dropna=False) if groups else [("", df)]):
            group = group[0] if isinstance(group, tuple) else group
            colour = color_for(str(group)) if group in DTYPE_COLORS else RUN_COLORS[i % len(RUN_COLORS)]
            fig.add_trace(
                go.Scatter(
                    x=sub[x] if x else list(range(len(sub))),
                    y=pd.to_numeric(sub[m], errors="coerce"),
                    mode="lines+markers",
                    name=html_text(str(group) or m),
                    line=dict(color=colour),
                )
            )
        style(
            fig,
            title(f"{run.experiment}: {m}", run, settings_text(run.config, 60)),
            x or "point",
            m,
            legend_title=groups[0] if groups else None,
        )
        charts.append(Chart(name=f"{run.experiment}-{m}", figure=fig, data=df))
    return charts
