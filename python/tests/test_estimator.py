"""PrivateLogisticRegression on scikit-learn's digits: accuracy, guarantee, randomness
policy, the budget, errors, and the scikit-learn protocol (clone, Pipeline,
cross_val_score, pickling)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from conftest import envelope, released_metadata
import privpred
from privpred import BudgetExhausted, PrivateLogisticRegression as PLR


@pytest.mark.parametrize(
    "method,kw,floor",
    [
        # floors well below the observed accuracy (digits, 1,257 training rows): a broken
        # mechanism (e.g. noise 10x too large, or labels shuffled) falls under them
        ("non-private", {}, 0.90),
        ("model-sensitivity", {"epsilon": 10.0}, 0.35),
        ("loss-perturbation", {"epsilon": 10.0}, 0.30),
        ("dp-sgd", {"epsilon": 10.0, "delta": 1e-5}, 0.50),
    ],
)
def test_private_training_methods_learn_digits(digits, method, kw, floor):
    Xtr, Xte, ytr, yte = digits
    est = PLR(unit_ball="normalize", classes="observed", method=method, **kw).fit(Xtr, ytr)
    acc = est.score(Xte, yte)
    assert acc > floor, (method, acc)
    assert est.release_ == ("non-private" if method == "non-private" else "private-release")
    proba = est.predict_proba(Xte)
    assert proba.shape == (len(Xte), 10)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    # predict is the argmax of the released scores
    np.testing.assert_array_equal(est.predict(Xte), est.classes_[proba.argmax(axis=1)])
    assert est.budget_left_ is None


def test_guarantee_is_recorded(digits):
    Xtr, _, ytr, _ = digits
    g = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=2.0, lam=1e-3).fit(Xtr, ytr).guarantee_
    assert g["method"] == "model-sensitivity"
    assert g["epsilon"] == 2.0 and g["delta"] == 0.0
    assert g["neighbours"] == "replace-one" and g["calibration"] == "corrected"
    assert g["budget_unlimited"] is True and g["budget"] is None
    assert g["valid_guarantee"] is True
    assert g["noise"]["distribution"] == "l2-laplace" and g["noise"]["beta"] > 0
    assert g["assumptions"]["n"] == len(Xtr) and g["assumptions"]["lambda"] == 1e-3
    assert PLR(unit_ball="normalize", method="non-private").fit(Xtr, ytr).guarantee_ is None


def test_seeded_fits_are_reproducible_experiments_and_os_fits_differ(digits):
    Xtr, Xte, ytr, _ = digits
    a = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3, random_state=7).fit(Xtr, ytr)
    b = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3, random_state=7).fit(Xtr, ytr)
    assert a.release_ == "experiment" and a.info_["seed_policy"] == {"policy": "seeded", "seed": 7}
    np.testing.assert_array_equal(a.theta_, b.theta_)
    c = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3).fit(Xtr, ytr)
    d = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3).fit(Xtr, ytr)
    assert c.release_ == "private-release" and c.info_["seed_policy"] == {"policy": "os-random"}
    assert not np.array_equal(c.theta_, d.theta_)


@pytest.mark.parametrize("method", ["prediction-sensitivity", "subsample-aggregate"])
def test_budgeted_methods_spend_and_refuse_past_b(digits, method):
    Xtr, Xte, ytr, yte = digits
    kw = {"teachers": 16} if method == "subsample-aggregate" else {}
    est = PLR(unit_ball="normalize", classes="observed", method=method, epsilon=10.0, budget=10, **kw).fit(Xtr, ytr)
    assert est.guarantee_["budget"] == 10 and est.budget_left_ == 10
    assert not hasattr(est, "predict_proba") and not hasattr(est, "decision_function")
    assert est.theta_ is None  # secret parameters
    assert est.predict(Xte[:6]).shape == (6,)
    assert est.budget_left_ == 4
    with pytest.raises(BudgetExhausted, match="needs 5 new answers but only 4 remain of the budget of 10"):
        est.predict(Xte[6:11])
    assert est.budget_left_ == 4  # all or nothing
    est.predict(Xte[6:10])
    with pytest.raises(BudgetExhausted, match="budget of 10 answers is exhausted"):
        est.predict(Xte[10:11])
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(est)
    with pytest.raises(RuntimeError, match="already released 10 of its 10 answers"):
        est.save("unused.safetensors")


@pytest.mark.parametrize("method", ["prediction-sensitivity", "subsample-aggregate"])
def test_the_pickle_guard_reads_the_models_kind_not_the_method_parameter(digits, method):
    # set_params(method="model-sensitivity") must not let a fitted budgeted estimator pickle
    # with its secret parameters (un-noised theta*, or every teacher) and a fresh budget
    Xtr, Xte, ytr, yte = digits
    kw = {"teachers": 16} if method == "subsample-aggregate" else {}
    est = PLR(unit_ball="normalize", classes="observed", method=method, epsilon=10.0, budget=10, **kw).fit(Xtr, ytr)
    est.set_params(method="model-sensitivity")
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(est)
    assert not hasattr(est, "predict_proba") and not hasattr(est, "decision_function")


@pytest.mark.parametrize("method", ["prediction-sensitivity", "subsample-aggregate"])
def test_a_saved_budgeted_estimator_answers_only_through_the_files_ledger(tmp_path, digits, method):
    # the attack: fit -> save(p) -> 3 in-memory answers -> load(p, ledger=new, init_ledger=True)
    # -> 3 more: two budgets for one model
    Xtr, Xte, ytr, yte = digits
    kw = {"teachers": 16} if method == "subsample-aggregate" else {}
    est = PLR(unit_ball="normalize", classes="observed", method=method, epsilon=10.0, budget=5, **kw).fit(Xtr, ytr)
    p = tmp_path / "m.safetensors"
    est.save(p)
    with pytest.raises(RuntimeError, match="answers only through"):
        est.predict(Xte[:3])
    # a second file would be a second default ledger and mark: refused, not a second budget
    with pytest.raises(RuntimeError, match="second budget"):
        est.save(tmp_path / "again.safetensors")
    assert not (tmp_path / "again.safetensors").exists()
    est.save(p)  # the same file: the same identity

    def ledger_id(path):
        return envelope(path)[0]["ledger_id"]

    assert len(ledger_id(p)) == 32


def test_budgeted_methods_answer_accurately_at_large_epsilon(digits):
    Xtr, Xte, ytr, yte = digits
    # per answer epsilon / B; prediction sensitivity needs a large epsilon (the paper's finding)
    est = PLR(unit_ball="normalize", classes="observed", method="prediction-sensitivity", epsilon=1e6, budget=len(Xte), lam=1e-3).fit(Xtr, ytr)
    assert est.score(Xte, yte) > 0.85


@pytest.mark.parametrize(
    "params,message",
    [
        # ranges of one parameter: scikit-learn's parameter validation, naming the range
        ({"epsilon": -1.0}, "The 'epsilon' parameter of PrivateLogisticRegression must be a float in the range (0.0, inf)"),
        ({"delta": 1.5}, "The 'delta' parameter of PrivateLogisticRegression must be a float in the range [0.0, 1.0)"),
        ({"lam": "often"}, "The 'lam' parameter of PrivateLogisticRegression must be"),
        ({"method": "prediction-sensitivity", "budget": 0}, "The 'budget' parameter of PrivateLogisticRegression must be an int in the range [1, 9223372036854775807] or None"),
        ({"method": "magic"}, "The 'method' parameter of PrivateLogisticRegression must be a str among"),
        ({"calibration": "loose"}, "The 'calibration' parameter of PrivateLogisticRegression must be a str among"),
        ({"bias": 1.5}, "The 'bias' parameter of PrivateLogisticRegression must be"),
        # what depends on several parameters: the core's message
        ({"lam": 0.0}, "invalid lambda = 0: this method needs λ > 0"),
        ({"method": "prediction-sensitivity"}, "invalid budget = unlimited: prediction-sensitivity needs a finite inference budget B >= 1"),
        ({"neighbours": "add-remove"}, "model-sensitivity"),
        ({"method": "dp-sgd", "delta": 0.0, "batch_size": 16}, "delta"),
        ({"unit_ball": "clip:-1"}, "invalid unit-ball rule = clip:-1"),
        ({"random_state": -3}, "The 'random_state' parameter of PrivateLogisticRegression must be an int in the range [0, 4294967295]"),
    ],
)
def test_bad_arguments_raise_value_error_with_the_core_message(digits, params, message):
    import re

    Xtr, _, ytr, _ = digits
    with pytest.raises(ValueError, match=re.escape(message)):
        PLR(**{"unit_ball": "normalize", "classes": "observed", **params}).fit(Xtr[:200], ytr[:200])


def test_queries_are_checked(digits):
    Xtr, Xte, ytr, _ = digits
    est = PLR(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="64 features"):
        est.predict(Xte[:, :10])
    with pytest.raises(ValueError, match="NaN"):
        est.predict(np.full((1, 64), np.nan))


def test_string_labels_and_bias(digits):
    Xtr, Xte, ytr, yte = digits
    names = np.array([f"digit-{k}" for k in range(10)])
    est = PLR(unit_ball="normalize", method="non-private", fit_intercept=True, bias=True).fit(Xtr, names[ytr])
    assert est.theta_.shape == (65, 10)  # the bias feature
    assert set(est.predict(Xte)) <= set(names)
    assert est.score(Xte, names[yte]) > 0.9


def test_clone_pipeline_and_cross_val_score(digits):
    Xtr, _, ytr, _ = digits
    # a public lambda suited to digits' ~1,400 rows (the default 0.01 is set for MNIST's 60,000)
    est = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=10.0, lam=0.1, random_state=0)
    c = clone(est)
    assert c.get_params() == est.get_params() and not hasattr(c, "classes_")
    c.set_params(epsilon=5.0, calibration="tight")
    assert c.get_params()["epsilon"] == 5.0
    pipe = make_pipeline(FunctionTransformer(lambda X: X / 16.0), est)
    scores = cross_val_score(pipe, Xtr, ytr, cv=3)
    assert scores.shape == (3,) and scores.mean() > 0.3


def test_pickle_round_trip_of_a_released_model(digits):
    Xtr, Xte, ytr, _ = digits
    est = PLR(unit_ball="normalize", classes="observed", epsilon=10.0, lam=1e-3).fit(Xtr, ytr)
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.predict_proba(Xte), est.predict_proba(Xte))
    assert back.guarantee_ == est.guarantee_


@pytest.mark.parametrize(
    "method,kw",
    [
        ("model-sensitivity", {"epsilon": 1.0, "lam": 1e-2}),
        ("loss-perturbation", {"epsilon": 1.0, "lam": 1e-2}),
        ("dp-sgd", {"epsilon": 1.0, "delta": 1e-5, "clip": 0.5, "epochs": 1.0}),
    ],
)
def test_released_state_is_the_same_on_neighbouring_datasets(digits, method, kw, tmp_path):
    """What leaves the process (info_, the saved file's metadata, a pickle's state) holds no
    statistic of the private data: trained with one seed on D and on D' (one row replaced)
    it is the same apart from the noisy weights; the measurements stay in
    private_diagnostics_, which is neither saved nor pickled."""
    import json as _json

    Xtr, _, ytr, _ = digits
    Xn = Xtr.copy()
    Xn[0] = Xtr[1] * 0.5
    fits = [PLR(unit_ball="normalize", classes="observed", method=method, random_state=3, **kw).fit(X, ytr) for X in (Xtr, Xn)]
    assert fits[0].info_ == fits[1].info_
    assert fits[0].private_diagnostics_["notice"].startswith("private to the data owner")
    metas = []
    for i, est in enumerate(fits):
        p = tmp_path / f"{i}.safetensors"
        est.save(p)
        # random by design (removed): the hashes over the noisy weights, the model's identity
        # in budget ledgers drawn at save, a seal's nonce
        meta = released_metadata(p)
        metas.append(meta)
        text = _json.dumps(meta)
        for private in ("gradient_norm\"", "clipped_fraction", "cross_validation", "rounding_bound"):
            assert private not in text, (method, private)
        state = pickle.loads(pickle.dumps(est)).__dict__
        assert state.get("private_diagnostics_") is None
    assert metas[0] == metas[1]
