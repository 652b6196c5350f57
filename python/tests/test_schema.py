"""`schema=`: raw table rows (numbers and category strings) through the same schema as
`privpred train --schema`, saved with the model, with the CLI's errors naming row and column."""

from __future__ import annotations

import json

import numpy as np
import pytest

import privpred
from privpred import _native

from conftest import cli

SCHEMA = {
    "privpred_schema": 1,
    "header": True,
    "columns": [
        {"name": "age", "type": "numeric", "min": 0, "max": 120},
        {"name": "dose", "type": "numeric", "min": 0, "max": 10, "out_of_bounds": "clip"},
        {"name": "colour", "type": "categorical", "categories": ["red", "green", "blue"]},
        {"name": "site", "type": "categorical", "categories": ["a", "b"], "unknown": "other"},
        {"name": "outcome", "type": "label", "classes": ["no", "yes"]},
    ],
}
COLOURS = ["red", "green", "blue"]


def table(n: int, seed: int = 0):
    """Rows in the schema's order without the label, and labels `no`/`yes` that depend on
    the colour and the age."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(0, 120, n)
    dose = rng.uniform(0, 10, n)
    colour = rng.integers(0, 3, n)
    site = rng.choice(["a", "b", "c"], n)
    X = np.empty((n, 4), dtype=object)
    X[:, 0] = age
    X[:, 1] = dose
    X[:, 2] = [COLOURS[c] for c in colour]
    X[:, 3] = site
    y = np.where((colour == 0) | (age > 90), "yes", "no")
    return X, y


def test_fit_predict_raw_rows_with_categorical_strings():
    X, y = table(600)
    m = privpred.PrivateLogisticRegression(method="non-private", lam=1e-4, schema=SCHEMA)
    m.fit(X, y)
    assert list(m.classes_) == ["no", "yes"]
    assert m.n_features_in_ == 4
    assert m.info_["input_dim"] == 2 + 3 + 3  # two numeric, 3 colours, 2 sites + other
    assert any(s.startswith("schema:") for s in m.info_["preprocessing_steps"])
    assert m.score(X, y) > 0.85
    # the rows with the label column included give the same answers (its cell is ignored)
    with_label = np.concatenate([X, y[:, None]], axis=1)
    np.testing.assert_array_equal(m.predict(with_label[:50]), m.predict(X[:50]))


def test_private_fit_and_dict_or_path_schema_agree(tmp_path):
    X, y = table(400)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    a = privpred.PrivateLogisticRegression(epsilon=10, random_state=3, schema=SCHEMA).fit(X, y)
    b = privpred.PrivateLogisticRegression(epsilon=10, random_state=3, schema=path).fit(X, y)
    np.testing.assert_array_equal(a.theta_, b.theta_)
    assert a.guarantee_["epsilon"] == 10


def test_numeric_labels_keep_their_type():
    X, y = table(300)
    y01 = (y == "yes").astype(int)
    s = json.loads(json.dumps(SCHEMA))
    s["columns"][-1]["classes"] = ["0", "1"]
    m = privpred.PrivateLogisticRegression(method="non-private", lam=1e-3, schema=s).fit(X, y01)
    assert m.classes_.dtype.kind == "i"
    assert set(m.predict(X)) <= {0, 1}


def test_schema_saved_with_model_and_loaded(tmp_path):
    X, y = table(300)
    m = privpred.PrivateLogisticRegression(method="non-private", lam=1e-3, schema=SCHEMA).fit(X, y)
    p = tmp_path / "m.safetensors"
    m.save(p)
    back = privpred.load(p)
    assert back.schema == json.loads(_native.schema_check(json.dumps(SCHEMA), "s"))
    assert list(back.classes_) == ["no", "yes"]
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    np.testing.assert_allclose(back.predict_proba(X), m.predict_proba(X))


def test_cli_trained_table_model_answers_raw_rows_in_python(tmp_path):
    """One schema: CSV -> `privpred train --schema` -> Python predict on raw rows, and
    Python encodes a row exactly as the CLI's table reader does."""
    X, y = table(300)
    csv = tmp_path / "t.csv"
    lines = ["age,dose,colour,site,outcome"]
    lines += [f"{r[0]!r},{r[1]!r},{r[2]},{r[3]},{lab}" for r, lab in zip(X, y)]
    csv.write_text("\n".join(lines) + "\n")
    sp = tmp_path / "s.json"
    sp.write_text(json.dumps(SCHEMA))
    out = tmp_path / "m.safetensors"
    cli("train", "non-private", "--lambda", "0.001", "--dataset", f"csv:{csv}",
        "--schema", str(sp), "--out", str(out))
    m = privpred.load(out)
    assert m.schema["columns"][2]["categories"] == COLOURS
    py = privpred.PrivateLogisticRegression(
        method="non-private", lam=1e-3, schema=sp, unit_ball="clip:1").fit(X, y)
    # same schema, same mapping, same deterministic non-private fit on the same rows
    assert m.info_["input_dim"] == py.info_["input_dim"]
    assert np.mean(m.predict(X) == py.predict(X)) > 0.97
    assert m.score(X, y) > 0.85


@pytest.mark.parametrize(
    "row,needle",
    [
        ([130.0, 1.0, "red", "a"], "row 2 of X: column `age`: value 130 outside the declared bounds [0, 120]"),
        ([30.0, 1.0, "purple", "a"], "row 2 of X: column `colour`: unknown category `purple`"),
        ([30.0, "lots", "red", "a"], "row 2 of X: column `dose`: `lots` is not a finite number"),
        ([None, 1.0, "red", "a"], "row 2 of X: column `age`: missing value"),
        ([30.0, 1.0, "red"], "row 2 of X: 3 values; the model's schema takes 4"),
    ],
)
def test_row_errors_name_row_and_column(row, needle):
    X, y = table(5)
    X = [list(r) for r in X]
    X[2] = row
    m = privpred.PrivateLogisticRegression(method="non-private", lam=1e-3, schema=SCHEMA)
    with pytest.raises(ValueError) as e:
        m.fit(X, y)
    assert needle in str(e.value)


def test_out_of_bounds_clip_and_other_slot():
    X, y = table(50)
    X[0, 1] = 1e6  # dose: clipped to its bound 10
    X[1, 3] = "zzz"  # site: the "other" slot
    m = privpred.PrivateLogisticRegression(method="non-private", lam=1e-3, schema=SCHEMA).fit(X, y)
    enc, _ = _native.encode_table(json.dumps(SCHEMA), [[str(v) for v in X[0]]])
    at_bound = list(X[0])
    at_bound[1] = 10.0  # the schema's upper bound of dose
    enc_bound, _ = _native.encode_table(json.dumps(SCHEMA), [[str(v) for v in at_bound]])
    np.testing.assert_allclose(enc, enc_bound)  # clipped to the bound, whatever the row map
    assert np.linalg.norm(enc[0]) <= 1 + 1e-6
    assert m.predict(X[:2]).shape == (2,)


def test_unknown_label_and_query_errors():
    X, y = table(20)
    y = y.copy().astype(object)
    y[4] = "maybe"
    m = privpred.PrivateLogisticRegression(method="non-private", lam=1e-3, schema=SCHEMA)
    with pytest.raises(ValueError, match=r"row 4 of X: column `outcome`: label `maybe` is not one of the declared classes"):
        m.fit(X, y)
    X, y = table(100)
    m.fit(X, y)
    bad = X[:3].copy()
    bad[1, 0] = -5.0
    with pytest.raises(ValueError, match=r"row 1 of X: column `age`: value -5 outside the declared bounds"):
        m.predict(bad)


@pytest.mark.parametrize(
    "change,needle",
    [
        (lambda s: s["columns"].pop(), "exactly one column of type `label`"),
        (lambda s: s["columns"][0].pop("max"), "without min and max"),
        (lambda s: s["columns"][2].update(categories=[]), "at least 1 categories"),
        (lambda s: s.update(privpred_schema=9), "version 1"),
    ],
)
def test_bad_schema_is_a_value_error(change, needle):
    s = json.loads(json.dumps(SCHEMA))
    change(s)
    X, y = table(10)
    with pytest.raises(ValueError, match=needle):
        privpred.PrivateLogisticRegression(schema=s).fit(X, y)


def test_schema_of_another_type_is_refused():
    X, y = table(10)
    with pytest.raises(ValueError, match="schema"):
        privpred.PrivateLogisticRegression(schema=42).fit(X, y)
