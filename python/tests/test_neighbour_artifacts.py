"""Neighbouring data sets through the Python inputs (numpy arrays and pandas DataFrames with
category columns through a schema), under both relations: D and D' (one row replaced; under
add/remove one row removed, with ``public_n``) give saved files, pickles and fitted attributes
that differ only in the noisy release (the model's parameters) and the hashes over it. And
the odometer keys a DataFrame of categories as ``fit`` reads it, the key the CLI computes for
the same table."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest

from conftest import cli, released_metadata
from privpred import PrivateLogisticRegression as PLR
from privpred import odometer

pd = pytest.importorskip("pandas")

N = 300

# The model's parameters: the noisy release of a private-training method (the secret
# parameters of a private-prediction one, which is never pickled).
RELEASE = ("theta_", "coef_", "intercept_")

REPLACE_ONE = [
    ("model-sensitivity", dict(epsilon=1.0, lam=1e-2)),
    ("loss-perturbation", dict(epsilon=1.0, lam=1e-2)),
    ("dp-sgd", dict(epsilon=1.0, delta=1e-5, clip=0.5, epochs=1.0, batch_size=32)),
    ("prediction-sensitivity", dict(epsilon=1.0, budget=10, lam=1e-2)),
    ("subsample-aggregate", dict(epsilon=1.0, budget=10, teachers=8)),
]
ADD_REMOVE = [
    ("loss-perturbation", dict(epsilon=1.0, lam=1e-2, neighbours="add-remove", public_n=320)),
    (
        "dp-sgd",
        dict(epsilon=1.0, delta=1e-5, clip=0.5, epochs=1.0, batch_size=32,
             neighbours="add-remove", public_n=320),
    ),
]
PICKLABLE = {"model-sensitivity", "loss-perturbation", "dp-sgd"}

SCHEMA = {
    "privpred_schema": 1,
    "header": True,
    "columns": [
        {"name": "age", "type": "numeric", "min": 0, "max": 120, "out_of_bounds": "clip"},
        {"name": "colour", "type": "categorical", "categories": ["red", "green"],
         "unknown": "other"},
        {"name": "income", "type": "numeric", "min": 0, "max": 200000},
        {"name": "outcome", "type": "label", "classes": ["no", "yes"]},
    ],
}


def numpy_set(variant):
    """D (300 rows of 6 features, labels a/b/c), or D' with row 0 replaced by an outlier of
    class c ("replaced") or removed ("removed")."""
    rng = np.random.default_rng(3)
    k = np.arange(N) % 3
    X = rng.normal(size=(N, 6)).astype(np.float32)
    X[np.arange(N), k] += 4.0
    y = np.asarray(["a", "b", "c"], dtype=object)[k]
    if variant == "replaced":
        X[0] = [9.0, -9.0, 9.0, -9.0, 9.0, -9.0]
        y[0] = "c"
    elif variant == "removed":
        X, y = X[1:], y[1:]
    return X, y


def frame(variant, n=N):
    """The table of SCHEMA as a DataFrame with a categorical colour column (a category the
    schema does not declare among its values) and categorical labels; D' as numpy_set's."""
    i = np.arange(n)
    age = (18 + (i * 29) % 72).astype(float)
    colour = np.asarray(["red", "green", "blue"], dtype=object)[i % 3]
    income = ((i * 7919) % 200000).astype(float)
    y = np.where(age / 120 + np.where(colour == "red", 0.35, 0.0) > 0.5, "yes", "no").astype(object)
    if variant == "replaced":
        age[0], colour[0], income[0], y[0] = 120.0, "purple", 0.0, "no"
    df = pd.DataFrame({
        "age": age,
        "colour": pd.Categorical(colour, categories=["purple", "blue", "green", "red"]),
        "income": income,
    })
    labels = pd.Series(pd.Categorical(y, categories=["no", "yes"]))
    if variant == "removed":
        df, labels = df.iloc[1:].reset_index(drop=True), labels.iloc[1:].reset_index(drop=True)
    return df, labels


def plain(v):
    """A fitted attribute as plain JSON-able data (arrays in full, not abbreviated)."""
    if isinstance(v, np.ndarray):
        return [plain(x) for x in v.tolist()]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (np.generic,)):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return repr(v)


def views(est, tmp_path, tag):
    """What leaves the estimator: its saved file's released metadata, its fitted attributes
    and (where it may be pickled) its pickle's state and the file inside it, less the noisy
    release."""
    p = tmp_path / f"{tag}.safetensors"
    est.save(p)
    attrs = {k: plain(v) for k, v in vars(est).items()
             if k.endswith("_") and not k.startswith("_") and k not in RELEASE
             and k != "private_diagnostics_"}
    out = {"saved": released_metadata(p), "attributes": attrs}
    if est.method in PICKLABLE:
        state = est.__getstate__()
        blob = state.pop("_artifact")
        inner = tmp_path / f"{tag}-pickled.safetensors"
        inner.write_bytes(blob)
        out["pickled_file"] = released_metadata(inner)
        out["pickle"] = {k: plain(v) for k, v in state.items()
                         if k not in RELEASE and k != "_saved_to"}
        # the pickle round trip gives the same public state
        again = pickle.loads(pickle.dumps(est))
        assert again.guarantee_ == est.guarantee_
    return out


def same_release(tmp_path, fit, neighbour, methods):
    for method, params in methods:
        seen = []
        for variant in ("base", neighbour):
            est = fit(method, params, variant)
            seen.append(views(est, tmp_path, f"{method}-{variant}"))
        for part in seen[0]:
            assert json.dumps(seen[0][part], sort_keys=True) == json.dumps(
                seen[1][part], sort_keys=True), f"{method} {neighbour}: {part} differs"
        text = json.dumps(seen[0])
        if neighbour == "removed":
            assert seen[0]["attributes"]["guarantee_"]["assumptions"]["n"] == 320
            for exact in ("300", "299"):
                assert f'\\"n\\":{exact}' not in text, (method, exact)


@pytest.mark.parametrize("neighbour, methods", [("replaced", REPLACE_ONE), ("removed", ADD_REMOVE)])
def test_numpy_neighbours_release_the_same_files_pickles_and_attributes(tmp_path, neighbour, methods):
    def fit(method, params, variant):
        X, y = numpy_set(variant)
        return PLR(unit_ball="normalize", method=method, classes=["a", "b", "c"], **params).fit(X, y)

    same_release(tmp_path, fit, neighbour, methods)


@pytest.mark.parametrize("neighbour, methods", [("replaced", REPLACE_ONE), ("removed", ADD_REMOVE)])
def test_dataframe_neighbours_release_the_same_files_pickles_and_attributes(tmp_path, neighbour, methods):
    def fit(method, params, variant):
        df, y = frame(variant)
        return PLR(method=method, schema=SCHEMA, **params).fit(df, y)

    same_release(tmp_path, fit, neighbour, methods)


def test_set_limit_keys_a_dataframe_of_categories_as_fit_and_the_cli_read_it(tmp_path):
    df, y = frame("base", n=120)
    odo = str(tmp_path / "odo.sqlite")
    rec = odometer.set_limit(odo, 1.0, X=df, y=y, schema=SCHEMA)
    assert rec["spent"]["fits"] == 0
    # the same rows in another order, the colour's categories in another order: one dataset
    order = np.random.default_rng(1).permutation(len(df))
    shuffled = df.iloc[order].reset_index(drop=True)
    shuffled["colour"] = shuffled["colour"].cat.reorder_categories(["red", "green", "blue", "purple"])
    assert odometer.dataset_key(shuffled, y.iloc[order], schema=SCHEMA) == rec["dataset"]
    # the plain strings of the same table: the same key
    plain_df = df.astype({"colour": str})
    assert odometer.dataset_key(plain_df, np.asarray(y, dtype=str), schema=SCHEMA) == rec["dataset"]
    # fit on the frame charges that key
    PLR(method="model-sensitivity", epsilon=0.5, lam=1e-2, schema=SCHEMA, odometer=odo).fit(df, y)
    [after] = odometer.show(odo, rec["dataset"])
    assert after["spent"]["fits"] == 1
    assert after["fits"][0]["state"] == "released"
    # the CLI keys the same table, written as CSV, with the same schema: the same dataset
    csv = tmp_path / "t.csv"
    out = df.copy()
    out["outcome"] = np.asarray(y, dtype=str)
    out.to_csv(csv, index=False)
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    other = str(tmp_path / "cli.sqlite")
    cli("odometer", "limit", "--odometer", other, "--dataset", f"csv:{csv}", "--schema",
        str(schema), "--epsilon", "1")
    shown = json.loads(cli("odometer", "show", "--odometer", other, "--json").stdout)
    assert [d["dataset"] for d in shown["datasets"]] == [rec["dataset"]]
    # a frame of categories without its schema is refused by name, not hashed raw
    with pytest.raises(ValueError, match="schema"):
        odometer.set_limit(odo, 1.0, X=df, y=y)
