"""privpred inside scikit-learn: the privacy warning (searches, cross-validation,
preprocessing fitted on the private data), the public-bounds scaler, coef_/intercept_ in
scikit-learn's layout, fit_intercept, sparse input, class_weight, verbose, n_jobs, strict
parameter validation, Python names in error messages and the plain-language guarantee."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, Normalizer, StandardScaler

import privpred
from privpred import PrivacyLeakWarning, PublicBoundsScaler
from privpred import PrivateLogisticRegression as PLR


def _leaks(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(x.message) for x in w if issubclass(x.category, PrivacyLeakWarning)]


# ---- item: the warning ------------------------------------------------------------------
def test_a_plain_fit_does_not_warn(digits):
    Xtr, _, ytr, _ = digits
    est, leaks = _leaks(lambda: PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3).fit(Xtr, ytr))
    assert leaks == [] and est.fit_warnings_ == []
    # stateless preprocessing and public bounds are no leak either
    for pre in (FunctionTransformer(lambda X: X / 16.0), Normalizer(),
                PublicBoundsScaler(0.0, 16.0)):
        _, leaks = _leaks(lambda: make_pipeline(pre, PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3)).fit(Xtr, ytr))
        assert leaks == [], type(pre).__name__


@pytest.mark.parametrize("scaler", [StandardScaler(), MinMaxScaler()])
def test_preprocessing_fitted_on_the_private_data_warns(digits, scaler):
    Xtr, _, ytr, _ = digits
    pipe, leaks = _leaks(lambda: make_pipeline(scaler, PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3)).fit(Xtr, ytr))
    assert len(leaks) == 1, leaks
    assert type(scaler).__name__ in leaks[0] and "PublicBoundsScaler" in leaks[0]
    assert pipe[-1].fit_warnings_ and "outside the guarantee" in pipe[-1].fit_warnings_[0]


def test_standardised_data_outside_a_pipeline_warns(digits):
    Xtr, _, ytr, _ = digits
    Xs = StandardScaler().fit_transform(Xtr)
    _, leaks = _leaks(lambda: PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3).fit(Xs, ytr))
    assert len(leaks) == 1 and "mean 0 and variance 1" in leaks[0]


def test_cross_validation_and_grid_search_warn_on_every_fit(digits):
    Xtr, _, ytr, _ = digits
    est = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3)
    _, leaks = _leaks(lambda: cross_val_score(est, Xtr, ytr, cv=3))
    assert len(leaks) == 3 and all("cross_val_score" in m for m in leaks), leaks
    assert "another release" in leaks[0]
    grid = GridSearchCV(est, {"lam": [1e-3, 1e-2]}, cv=2)
    _, leaks = _leaks(lambda: grid.fit(Xtr, ytr))
    assert len(leaks) == 2 * 2 + 1 and all("GridSearchCV" in m for m in leaks)
    # inside a pipeline with a fitted scaler: both findings
    pipe = make_pipeline(StandardScaler(), est)
    _, leaks = _leaks(lambda: cross_val_score(pipe, Xtr, ytr, cv=2))
    assert len(leaks) == 4
    # the non-private reference model has no guarantee to warn about
    _, leaks = _leaks(lambda: cross_val_score(PLR(unit_ball="normalize", method="non-private"), Xtr, ytr, cv=2))
    assert leaks == []


def test_the_warning_can_be_made_an_error(digits):
    Xtr, _, ytr, _ = digits
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        with pytest.raises(PrivacyLeakWarning):
            cross_val_score(PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3), Xtr, ytr, cv=2, error_score="raise")


def test_public_bounds_scaler_spends_nothing_and_says_so(digits):
    Xtr, Xte, ytr, yte = digits
    s = PublicBoundsScaler(lower=0.0, upper=16.0)
    assert "spends no privacy budget" in repr(s) and "spends no privacy budget" in s.__doc__
    # nothing is learned: fitted on different data, the transform is identical
    a = clone(s).fit(Xtr).transform(Xte)
    b = clone(s).fit(Xtr[:10] * 3 + 7).transform(Xte)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, Xte / 16.0)
    assert a.min() >= 0 and a.max() <= 1
    # clipped to the bounds; per-feature bounds
    np.testing.assert_array_equal(s.transform([[-5.0] * 64, [99.0] * 64]), [[0.0] * 64, [1.0] * 64])
    per = PublicBoundsScaler(lower=np.zeros(64), upper=np.full(64, 32.0)).fit(Xtr)
    np.testing.assert_allclose(per.transform(Xte), Xte / 32.0)
    np.testing.assert_allclose(per.inverse_transform(per.transform(Xte)), Xte)
    # the state after fit is the parameters and the (public) number of features only
    assert {k for k in vars(clone(s).fit(Xtr)) if k.endswith("_")} == {"n_features_in_"}
    # x/||x|| makes a scale by public bounds free for the model: with the same seed, the
    # same model as on the raw pixels (nothing clipped: digits' pixels are 0..16)
    pipe = make_pipeline(s, PLR(unit_ball="normalize", classes="observed", epsilon=10.0, lam=1e-2, random_state=0)).fit(Xtr, ytr)
    raw = PLR(unit_ball="normalize", classes="observed", epsilon=10.0, lam=1e-2, random_state=0).fit(Xtr, ytr)
    np.testing.assert_array_equal(pipe.predict(Xte), raw.predict(Xte))


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"lower": 1.0, "upper": 1.0}, "each upper bound must be greater than its lower bound"),
        ({"lower": np.nan, "upper": 1.0}, "invalid lower"),
        ({"lower": [0.0, 0.0], "upper": 1.0}, "2 bounds for 64 features"),
    ],
)
def test_public_bounds_scaler_refuses_bad_bounds(digits, kw, message):
    with pytest.raises(ValueError, match=message):
        PublicBoundsScaler(**kw).fit(digits[0])


# ---- item: scikit-learn's layout and parameters --------------------------------------------
def _unit(X):
    X = np.asarray(X, dtype=np.float64)
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(n > 0, n, 1.0)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_coef_and_intercept_in_sklearn_layout(digits, fit_intercept):
    Xtr, Xte, ytr, _ = digits
    est = PLR(unit_ball="normalize", classes="observed", epsilon=10.0, lam=1e-3, fit_intercept=fit_intercept).fit(Xtr, ytr)
    assert est.coef_.shape == (10, 64) and est.intercept_.shape == (10,)
    assert (np.any(est.intercept_ != 0)) == fit_intercept
    z = _unit(Xte) @ est.coef_.T + est.intercept_
    np.testing.assert_allclose(z, est.decision_function(Xte), rtol=1e-5, atol=1e-5)
    assert est.theta_.shape == (65 if fit_intercept else 64, 10)
    # binary: one row, the second class against the first, as scikit-learn
    two = ytr < 2
    b = PLR(unit_ball="normalize", classes="observed", epsilon=10.0, lam=1e-3).fit(Xtr[two], ytr[two])
    assert b.coef_.shape == (1, 64) and b.intercept_.shape == (1,)
    np.testing.assert_allclose(_unit(Xte) @ b.coef_[0] + b.intercept_[0],
                               b.decision_function(Xte), rtol=1e-5, atol=1e-5)
    # secret parameters have no layout
    ps = PLR(unit_ball="normalize", classes="observed", method="prediction-sensitivity", epsilon=10.0, budget=5, lam=1e-3).fit(Xtr, ytr)
    assert not hasattr(ps, "coef_") and not hasattr(ps, "intercept_")


def test_fit_intercept_and_bias_parameters(digits):
    Xtr, _, ytr, _ = digits
    assert PLR(unit_ball="normalize", classes="observed").fit_intercept is False and PLR(unit_ball="normalize", classes="observed").bias is None  # the default by measurement
    est = PLR(unit_ball="normalize", method="non-private", fit_intercept=True).fit(Xtr, ytr)
    assert any(s.startswith("bias:0.05 ") for s in est.info_["preprocessing_steps"])
    est = PLR(unit_ball="normalize", method="non-private").fit(Xtr, ytr)
    assert not any(s.startswith("bias:") for s in est.info_["preprocessing_steps"])
    with pytest.raises(ValueError, match="invalid bias = 0.3 with fit_intercept=False"):
        PLR(unit_ball="normalize", classes="observed", fit_intercept=False, bias=0.3).fit(Xtr, ytr)
    with pytest.raises(ValueError, match=r"in the range \(0\.0, 1\.0\)"):
        PLR(unit_ball="normalize", classes="observed", bias=0.0).fit(Xtr, ytr)


def test_sparse_csr_input_gives_the_dense_answers(digits):
    Xtr, Xte, ytr, _ = digits
    dense = PLR(unit_ball="normalize", classes="observed", epsilon=10.0, lam=1e-3, random_state=1).fit(Xtr, ytr)
    sparse = PLR(unit_ball="normalize", classes="observed", epsilon=10.0, lam=1e-3, random_state=1).fit(sp.csr_matrix(Xtr), ytr)
    np.testing.assert_array_equal(dense.coef_, sparse.coef_)
    np.testing.assert_array_equal(sparse.predict(sp.csr_matrix(Xte)), dense.predict(Xte))
    np.testing.assert_allclose(sparse.predict_proba(sp.csr_matrix(Xte)), dense.predict_proba(Xte))


@pytest.mark.parametrize("cw", ["balanced", {0: 2.0, 1: 1.0}])
def test_class_weight_is_refused_with_the_reason(digits, cw):
    Xtr, _, ytr, _ = digits
    with pytest.raises(ValueError, match="invalid class_weight.*calibrated for one example of weight 1"):
        PLR(unit_ball="normalize", classes="observed", class_weight=cw).fit(Xtr, ytr)


def test_verbose_and_n_jobs(digits, capsys):
    Xtr, Xte, ytr, _ = digits
    a = PLR(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3, random_state=2, verbose=1, n_jobs=1).fit(Xtr, ytr)
    err = capsys.readouterr().err
    assert "[privpred] fitting model-sensitivity on 1257 rows x 64 features" in err
    assert "[privpred] fitted in" in err and "differential privacy" in err
    b = PLR(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3, random_state=2, n_jobs=-1).fit(Xtr, ytr)
    assert capsys.readouterr().err == ""
    # the thread count changes no result
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="invalid n_jobs = 0"):
        PLR(unit_ball="normalize", classes="observed", n_jobs=0).fit(Xtr, ytr)


@pytest.mark.parametrize(
    "params,name",
    [
        ({"budget": 2.5, "method": "prediction-sensitivity"}, "budget"),
        ({"epsilon": "1"}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": 1.5}, "delta"),
        ({"lam": "often"}, "lam"),
        ({"method": "magic"}, "method"),
        ({"neighbours": "swap"}, "neighbours"),
        ({"teachers": 0.5}, "teachers"),
        ({"batch_size": "256"}, "batch_size"),
        ({"fit_intercept": "yes"}, "fit_intercept"),
        ({"n_jobs": 1.5}, "n_jobs"),
    ],
)
def test_strict_parameter_validation_as_scikit_learn(digits, params, name):
    from sklearn.utils._param_validation import InvalidParameterError

    Xtr, _, ytr, _ = digits
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of PrivateLogisticRegression must be"):
        PLR(**{"unit_ball": "normalize", "classes": "observed", **params}).fit(Xtr[:100], ytr[:100])
    assert issubclass(InvalidParameterError, ValueError)


def test_python_errors_name_python_parameters_not_cli_flags(tmp_path):
    from privpred import accounting

    with pytest.raises(ValueError) as e:
        accounting.epsilon_dp_sgd(0.01, 1.0, 10, 1e-5, accountant="rdp", neighbours="replace-one")
    assert 'accountant="pld"' in str(e.value) and 'neighbours="add-remove"' in str(e.value)
    assert "--" not in str(e.value)
    with pytest.raises(ValueError) as e:
        privpred.calibrate("dp-sgd", epsilon=1.0, delta=1e-5, n=100)
    assert "batch_size" in str(e.value) and "--" not in str(e.value)
    with pytest.raises(ValueError) as e:
        privpred.calibrate("model-sensitivity", epsilon=1.0, n=100, lam=1.0, neighbours="add-remove")
    assert "--" not in str(e.value), str(e.value)


def test_the_python_sources_name_no_cli_flag_in_a_message():
    """No error message in the package's sources names a command-line flag."""
    import ast
    import pathlib

    root = pathlib.Path(privpred.__file__).parent
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                text = ast.unparse(node.exc)
                assert " --" not in text and "'--" not in text, (path.name, text)


# ---- item: the plain-language guarantee -----------------------------------------------------
def test_the_guarantee_has_a_one_sentence_summary(digits, tmp_path):
    Xtr, _, ytr, _ = digits
    g = PLR(unit_ball="normalize", classes="observed", epsilon=1.0).fit(Xtr, ytr).guarantee_
    s = g["summary"]
    assert s.count(". ") == 0 and s.endswith(".")  # one sentence
    assert s.startswith("Anyone who sees this model and any number of its answers")
    assert "even knowing every other training example" in s
    assert "replaced by another" in s and "(1, 0)-differential privacy" in s
    # the default lambda is the public rule: nothing selected on the data is left out
    assert "cross-validation" not in s and g["selection"]["method"] == "public-rule"
    cv = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam="cv").fit(Xtr, ytr).guarantee_
    assert cv["summary"].startswith("NOT a valid guarantee (the hyperparameter was selected")
    assert "not covered: the lambda chosen by cross-validation on the same data" in cv["summary"]
    assert g["epsilon"] == 1.0 and g["method"] == "model-sensitivity"  # structured fields stay
    b = PLR(unit_ball="normalize", classes="observed", method="prediction-sensitivity", epsilon=2.0, budget=7, lam=1e-3,
            delta=1e-6).fit(Xtr, ytr).guarantee_["summary"]
    assert b.startswith("Anyone who sees up to B = 7 answers of this model")
    assert "(2, 1e-06)-differential privacy" in b and "cross-validation" not in b
    ar = PLR(unit_ball="normalize", classes="observed", method="dp-sgd", epsilon=1.0, delta=1e-5, clip=0.5, epochs=1, neighbours="add-remove",
             public_n=len(Xtr)).fit(Xtr, ytr).guarantee_["summary"]
    assert "added or removed" in ar and "training-set size N" in ar
    paper = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3, calibration="paper").fit(Xtr, ytr).guarantee_
    if not paper["valid_guarantee"]:
        assert paper["summary"].startswith("NOT a valid guarantee")
    # a saved and loaded model says it too
    est = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=1e-3).fit(Xtr, ytr)
    est.save(tmp_path / "m.safetensors")
    assert "differential privacy" in privpred.load(tmp_path / "m.safetensors").guarantee_["summary"]
