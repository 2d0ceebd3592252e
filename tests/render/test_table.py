"""Tables as pages show them: a missing value is "—", never None or nan."""

import pandas as pd

from render.table import with_dashes


def test_missing_values_read_as_a_dash_and_full_columns_stay_numbers():
    df = pd.DataFrame({"pct": [None, None], "err": [1.25e-5, float("nan")], "n": [1, 2], "why": ["x", None]})
    shown = with_dashes(df, {"err": "{:.3e}"})
    assert list(shown["pct"]) == ["—", "—"] and list(shown["why"]) == ["x", "—"]
    assert list(shown["err"]) == ["1.250e-05", "—"]
    assert shown["n"].tolist() == [1, 2] and pd.api.types.is_integer_dtype(shown["n"])
    assert not shown.isna().any().any() and "None" not in shown.astype(str).to_numpy()
