"""The data owner's privacy odometer from Python: every fit is charged its whole guarantee
before training, a fit past the limit raises ValueError and trains nothing, concurrent
fitting processes cannot both pass the limit, a fit that fails after it started stays
charged, and seeded, cross-validated and searched fits are refused."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import privpred
from privpred import PrivateLogisticRegression, odometer


def toy(n=240, d=6, seed=3):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[np.arange(n), y] += 4.0
    return X, y


def test_fits_add_up_and_a_fit_past_the_limit_trains_nothing(tmp_path):
    X, y = toy()
    odo = str(tmp_path / "odo.sqlite")
    # the odometer is created by a limit, never by a fit
    est = PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=0.5, lam=1e-2, odometer=odo)
    with pytest.raises(ValueError, match="does not exist"):
        est.fit(X, y)
    assert not (tmp_path / "odo.sqlite").exists()
    rec = odometer.set_limit(odo, 1.0, 1e-5, X=X, y=y)
    assert rec["spent"]["fits"] == 0
    est.fit(X, y)
    budgeted = PrivateLogisticRegression(unit_ball="normalize", classes="observed", 
        method="prediction-sensitivity", epsilon=0.5, delta=1e-5, budget=20, lam=1e-2, odometer=odo
    )
    budgeted.fit(X[::-1], y[::-1])  # the same rows in another order: the same dataset
    [rec] = odometer.show(odo)
    assert rec["dataset"] == odometer.dataset_key(X, y)
    assert rec["spent"] == {"fits": 2, "epsilon": 1.0, "delta": 1e-5}
    assert [f["state"] for f in rec["fits"]] == ["released", "released"]
    assert rec["fits"][1]["budget"] == 20
    fresh = PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=0.01, lam=1e-2, odometer=odo)
    with pytest.raises(ValueError) as e:
        fresh.fit(X, y)
    msg = str(e.value)
    assert "2 fit(s) spent epsilon = 1, delta = 1e-5" in msg, msg
    assert "would cost epsilon = 0.01" in msg and "limit epsilon = 1" in msg, msg
    assert not hasattr(fresh, "guarantee_"), "a refused fit trained a model"
    with pytest.raises(ValueError, match="no finite guarantee"):
        PrivateLogisticRegression(unit_ball="normalize", method="non-private", odometer=odo).fit(X, y)
    assert odometer.show(odo, rec["dataset"])[0]["spent"]["fits"] == 2


def test_a_failed_fit_is_not_charged_and_keys_are_the_owners(tmp_path):
    X, y = toy()
    odo = str(tmp_path / "odo.sqlite")
    odometer.set_limit(odo, 1.0, key="census-2020")
    est = PrivateLogisticRegression(unit_ball="normalize", classes="observed", 
        method="model-sensitivity", epsilon=0.4, lam=1e-2, odometer=odo, odometer_key="census-2020"
    )
    est.fit(X, y)
    # DP-SGD without delta: refused by the method after the reservation, which stays counted
    # (a failed fit is charged: retrying until success would otherwise spend more than shown)
    bad = PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="dp-sgd", epsilon=0.4, odometer=odo, odometer_key="census-2020")
    with pytest.raises(ValueError):
        bad.fit(X, y)
    [rec] = odometer.show(odo, "census-2020")
    assert rec["spent"]["fits"] == 2 and rec["spent"]["epsilon"] == 0.8
    assert [f["state"] for f in rec["fits"]] == ["released", "reserved"]
    # a dataset without a limit is refused
    with pytest.raises(ValueError, match="no limit for dataset"):
        PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=0.1, lam=1e-2, odometer=odo).fit(X, y)
    with pytest.raises(ValueError, match="paper"):
        PrivateLogisticRegression(unit_ball="normalize", classes="observed", 
            method="model-sensitivity", epsilon=0.1, calibration="paper", odometer=odo, odometer_key="census-2020"
        ).fit(X, y)


def test_concurrent_fitting_processes_cannot_both_pass_the_limit(tmp_path):
    X, y = toy()
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    odo = str(tmp_path / "odo.sqlite")
    odometer.set_limit(odo, 1.0, X=X, y=y)
    script = textwrap.dedent(
        f"""
        import sys, numpy as np
        from privpred import PrivateLogisticRegression
        X = np.load({str(tmp_path / 'X.npy')!r}); y = np.load({str(tmp_path / 'y.npy')!r})
        try:
            PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=0.25, lam=1e-2,
                                      odometer={odo!r}).fit(X, y)
        except ValueError as e:
            print(e, file=sys.stderr)
            sys.exit(3)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
        for _ in range(10)
    ]
    codes = []
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode in (0, 3), err
        if p.returncode == 3:
            assert "past the limit epsilon = 1" in err, err
        codes.append(p.returncode)
    assert codes.count(0) == 4, codes
    [rec] = odometer.show(odo)
    assert rec["spent"]["fits"] == 4 and rec["spent"]["epsilon"] == 1.0


def test_the_odometer_parameters_are_sklearn_parameters(tmp_path):
    from sklearn.base import clone

    est = PrivateLogisticRegression(unit_ball="normalize", classes="observed", odometer=str(tmp_path / "o.sqlite"), odometer_key="k")
    c = clone(est)
    assert c.get_params()["odometer"] == str(tmp_path / "o.sqlite")
    assert c.get_params()["odometer_key"] == "k"
    assert "odometer" in privpred.__all__


def test_seeded_cross_validated_and_searched_fits_are_refused(tmp_path):
    from sklearn.model_selection import GridSearchCV

    X, y = toy()
    odo = str(tmp_path / "odo.sqlite")
    odometer.set_limit(odo, 10.0, X=X, y=y)
    base = dict(classes="observed", method="model-sensitivity", epsilon=0.1, odometer=odo)
    with pytest.raises(ValueError, match="seeded"):
        PrivateLogisticRegression(unit_ball="normalize", **base, lam=1e-2, random_state=1).fit(X, y)
    with pytest.raises(ValueError, match="cv"):
        PrivateLogisticRegression(unit_ball="normalize", **base, lam="cv").fit(X, y)
    with pytest.raises(ValueError, match="search"):
        GridSearchCV(
            PrivateLogisticRegression(unit_ball="normalize", **base), {"lam": [1e-2, 1e-1]}, cv=2, error_score="raise"
        ).fit(X, y)
    [rec] = odometer.show(odo)
    assert rec["spent"]["fits"] == 0


def test_the_key_is_the_whole_input_through_the_schema_as_fit_reads_it(tmp_path):
    pd = pytest.importorskip("pandas")
    schema = {
        "privpred_schema": 1,
        "header": True,
        "columns": [
            {"name": "age", "type": "numeric", "min": 0, "max": 100},
            {"name": "colour", "type": "categorical", "categories": ["red", "blue"]},
            {"name": "label", "type": "label", "classes": ["no", "yes"]},
        ]
    }
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "age": rng.integers(0, 100, 120),
            "colour": pd.Categorical(rng.choice(["red", "blue"], 120)),
        }
    )
    y = np.where(df["age"] > 50, "yes", "no")
    odo = str(tmp_path / "odo.sqlite")
    rec = odometer.set_limit(odo, 1.0, X=df, y=y, schema=schema)
    PrivateLogisticRegression(method="model-sensitivity", epsilon=0.5, lam=1e-2, schema=schema,
                              odometer=odo).fit(df, y)
    [after] = odometer.show(odo, rec["dataset"])
    assert after["spent"]["fits"] == 1
    with pytest.raises(ValueError, match="schema"):
        odometer.dataset_key(df, y)
