"""Tables through a schema column by column: the same encoding as the row path (each row's
cells as text), the same messages, and no text cell per number (the schema path's time
against pre-encoded rows is measured by python/benchmarks/schema_path.py, not asserted)."""

from __future__ import annotations

import numpy as np
import pytest

from privpred import PrivateLogisticRegression as PLR
from privpred import _native, _schema

SCHEMA = {
    "privpred_schema": 1,
    "header": False,
    "columns": [
        {"name": "age", "type": "numeric", "min": 0, "max": 120, "out_of_bounds": "clip"},
        {"name": "income", "type": "numeric", "min": 0, "max": 1000000},
        {"name": "region", "type": "categorical", "categories": ["north", "south", "east", "west"]},
        {"name": "plan", "type": "categorical", "categories": ["basic", "plus"], "unknown": "other"},
        {"name": "score", "type": "numeric", "min": -5, "max": 5},
        {"name": "outcome", "type": "label", "classes": ["stayed", "left"]},
    ],
}


def _table(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    age = rng.uniform(0, 130, n).round(1)
    income = rng.uniform(0, 1e6, n)
    region = rng.choice(["north", "south", "east", "west"], n).astype(object)
    plan = rng.choice(["basic", "plus", "gold"], n).astype(object)
    score = rng.normal(0, 1.5, n).clip(-5, 5)
    y = np.where(income / 1e6 + 0.1 * score + (region == "north") > 0.9, "left", "stayed").astype(object)
    return age, income, region, plan, score, y


def test_columns_encode_as_the_rows_do_for_arrays_and_dataframes():
    text, schema = _schema.load_schema(SCHEMA)
    cols = _table(500)
    X = np.empty((500, 5), dtype=object)
    for j, c in enumerate(cols[:5]):
        X[:, j] = c
    X[3, 0] = None  # a missing clipped value is still an error, as in the row path
    y = cols[5]
    with pytest.raises(ValueError) as a:
        _schema.encode(X, schema, text, y)
    with pytest.raises(ValueError) as b:
        _native.encode_table(text, _schema.rows(X, schema), _schema.labels(y))
    assert str(a.value) == str(b.value) and "row 3" in str(a.value)
    X[3, 0] = 40.0
    got_x, got_y = _schema.encode(X, schema, text, y)
    want_x, want_y = _native.encode_table(text, _schema.rows(X, schema), _schema.labels(y))
    np.testing.assert_array_equal(got_x, want_x)
    np.testing.assert_array_equal(got_y, want_y)
    # queries, and the table with its label column in place
    np.testing.assert_array_equal(_schema.encode(X, schema, text)[0], want_x)
    full = np.concatenate([X, y[:, None]], axis=1)
    np.testing.assert_array_equal(_schema.encode(full, schema, text, y)[0], want_x)
    pd = pytest.importorskip("pandas")
    names = [c["name"] for c in SCHEMA["columns"][:5]]
    df = pd.DataFrame({n: c for n, c in zip(names, cols[:5])})
    df.loc[3, "age"] = 40.0
    df = df[names[::-1]]  # by name, whatever the order
    got_x, got_y = _schema.encode(df, schema, text, y)
    np.testing.assert_array_equal(got_x, want_x)
    np.testing.assert_array_equal(got_y, want_y)


def test_a_bad_cell_is_named_by_row_as_the_row_path_names_it():
    text, schema = _schema.load_schema(SCHEMA)
    cols = _table(50)
    X = np.empty((50, 5), dtype=object)
    for j, c in enumerate(cols[:5]):
        X[:, j] = c
    for i, j, v in [(7, 2, "middle"), (9, 1, 2e6), (11, 4, float("inf")), (13, 1, "abc")]:
        Z = X.copy()
        Z[i, j] = v
        with pytest.raises(ValueError) as a:
            _schema.encode(Z, schema, text, cols[5])
        with pytest.raises(ValueError) as b:
            _native.encode_table(text, _schema.rows(Z, schema), _schema.labels(cols[5]))
        assert str(a.value) == str(b.value), (a.value, b.value)
        assert f"row {i}" in str(a.value)
    y = cols[5].copy()
    y[5] = "maybe"
    with pytest.raises(ValueError, match="row 5 of X: column `outcome`: label `maybe`"):
        _schema.encode(X, schema, text, y)


def test_rows_are_encoded_column_by_column_not_cell_by_cell(monkeypatch):
    """DataFrames, object arrays and rectangular lists of rows take the column path: each
    distinct value becomes a text cell once, numbers never do (the speed of the schema path;
    python/benchmarks/schema_path.py measures it)."""
    pd = pytest.importorskip("pandas")
    n = 5_000
    cols = _table(n, seed=2)
    names = [c["name"] for c in SCHEMA["columns"][:5]]
    X = np.empty((n, 5), dtype=object)
    for j, c in enumerate(cols[:5]):
        X[:, j] = c
    y = cols[5]
    want = PLR(method="non-private", lam=1e-3, schema=SCHEMA).fit(X, y).theta_
    calls = []
    real = _schema.cell
    monkeypatch.setattr(_schema, "cell", lambda v: calls.append(v) or real(v))
    df = pd.DataFrame({n_: c for n_, c in zip(names, cols[:5])})
    for given in (df, X, X.tolist(), [tuple(r) for r in X.tolist()]):
        calls.clear()
        got = PLR(method="non-private", lam=1e-3, schema=SCHEMA).fit(given, y).theta_
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
        # the categories (4 regions, 3 plans) and the two labels: never one per cell
        assert len(calls) <= 4 + 3 + 2, (type(given), len(calls))
    # a ragged list still gets the row path's message naming the row
    ragged = X.tolist()
    ragged[3] = ragged[3][:4]
    with pytest.raises(ValueError, match="row 3 of X"):
        PLR(method="non-private", lam=1e-3, schema=SCHEMA).fit(ragged, y)


def test_the_schema_path_benchmark_runs():
    import json
    import subprocess
    import sys

    from conftest import REPO

    r = subprocess.run(
        [sys.executable, str(REPO / "python/benchmarks/schema_path.py"), "--rows", "3000",
         "--repeat", "1"],
        capture_output=True, text=True, check=True,
    )
    out = json.loads(r.stdout)
    assert out["rows"] == 3000
    for k in ("dataframe", "python_rows", "object_array"):
        assert out[f"{k}_ratio"] > 0
