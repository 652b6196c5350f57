"""Parameter errors name Python's parameter and its valid range: a table without a schema
(the CLI's refusal, and the image-like map only when asked), a parameter the method would
ignore (the rule `privpred train` applies to its flags, from the same library function), and
out-of-range counts as ValueError rather than a numerical failure."""

from __future__ import annotations

import numpy as np
import pytest

import privpred
from privpred import PrivateLogisticRegression as PLR

from conftest import cli

PRIVATE = ["model-sensitivity", "loss-perturbation", "dp-sgd", "prediction-sensitivity",
           "subsample-aggregate"]


def _kw(method):
    """What each method needs to fit at all (its own knobs only)."""
    return {
        "model-sensitivity": {},
        "loss-perturbation": {},
        "dp-sgd": {"delta": 1e-5},
        "prediction-sensitivity": {"budget": 10},
        "subsample-aggregate": {"budget": 10},
        "non-private": {},
    }[method]


def test_a_table_without_a_schema_is_refused_naming_schema_and_the_opt_in(digits):
    Xtr, _, ytr, _ = digits
    for method in ["non-private"] + PRIVATE:
        with pytest.raises(ValueError) as e:
            PLR(method=method, classes="observed", **_kw(method)).fit(Xtr, ytr)
        msg = str(e.value)
        assert "schema=" in msg and 'unit_ball="normalize"' in msg, msg
        assert "unit length" in msg


def test_image_like_rows_are_normalised_when_asked(digits):
    Xtr, Xte, ytr, yte = digits
    a = PLR(method="non-private", lam=1e-4, unit_ball="normalize").fit(Xtr, ytr)
    assert any(s.startswith("unit-ball:normalize") for s in a.info_["preprocessing_steps"])
    assert a.score(Xte, yte) > 0.9
    # the unit-ball rule is exactly x / ||x|| (scikit-learn's layout over the mapped rows)
    u = Xte / np.linalg.norm(Xte, axis=1, keepdims=True)
    np.testing.assert_allclose(a.decision_function(Xte), u @ a.coef_.T + a.intercept_, atol=1e-4)
    b = PLR(method="model-sensitivity", epsilon=10, classes=range(10),
            unit_ball="normalize").fit(Xtr, ytr)
    assert b.guarantee_["epsilon"] == 10
    # clip:R is a data-independent choice as well
    c = PLR(method="non-private", lam=1e-4, unit_ball="clip:80").fit(Xtr, ytr)
    assert any(s.startswith("unit-ball:clip:80") for s in c.info_["preprocessing_steps"])


def test_a_saved_model_reloads_with_its_unit_ball_rule(digits, tmp_path):
    Xtr, _, ytr, _ = digits
    m = PLR(method="model-sensitivity", epsilon=5, classes="observed",
            unit_ball="normalize").fit(Xtr, ytr)
    m.save(tmp_path / "m.safetensors")
    back = privpred.load(tmp_path / "m.safetensors")
    assert back.get_params()["unit_ball"] == "normalize"
    assert back.get_params()["budget"] is None  # answers cost nothing: no budget stated
    # refitted from the loaded parameters: no parameter the method ignores is set
    from sklearn.base import clone
    clone(back).set_params(classes="observed").fit(Xtr, ytr)


@pytest.mark.parametrize("method", ["non-private", "model-sensitivity", "loss-perturbation",
                                    "prediction-sensitivity", "subsample-aggregate"])
@pytest.mark.parametrize("clip", [0.5, "private", "cv"])
def test_clip_is_refused_by_the_methods_that_do_not_use_it(digits, method, clip):
    Xtr, _, ytr, _ = digits
    with pytest.raises(ValueError, match=rf"^clip does not apply to {method}: .*dp-sgd only"):
        PLR(method=method, classes="observed", clip=clip, unit_ball="normalize",
            **_kw(method)).fit(Xtr, ytr)


def test_dp_sgd_takes_clip_and_refuses_lam(digits):
    Xtr, _, ytr, _ = digits
    m = PLR(method="dp-sgd", epsilon=5, delta=1e-5, clip=0.5, batch_size=32, epochs=2,
            classes="observed", unit_ball="normalize").fit(Xtr, ytr)
    assert m.info_["clip"] == 0.5
    for lam in (1e-3, "private", "cv"):
        with pytest.raises(ValueError, match=r"^lam does not apply to dp-sgd: .*its knob is clip"):
            PLR(method="dp-sgd", epsilon=5, delta=1e-5, lam=lam, classes="observed",
                unit_ball="normalize").fit(Xtr, ytr)


@pytest.mark.parametrize("param,value", [("batch_size", 16), ("epochs", 3), ("learning_rate", 0.5)])
@pytest.mark.parametrize("method", ["non-private", "model-sensitivity", "subsample-aggregate"])
def test_dp_sgds_schedule_is_refused_by_the_other_methods(digits, method, param, value):
    Xtr, _, ytr, _ = digits
    with pytest.raises(ValueError, match=rf"^{param} does not apply to {method}: .*dp-sgd only"):
        PLR(method=method, classes="observed", unit_ball="normalize", **{param: value},
            **_kw(method)).fit(Xtr, ytr)


def test_teachers_and_budget_are_refused_where_they_mean_nothing(digits):
    Xtr, _, ytr, _ = digits
    for method in ["non-private", "model-sensitivity", "dp-sgd", "prediction-sensitivity"]:
        with pytest.raises(ValueError, match=rf"^teachers does not apply to {method}: .*subsample-aggregate only"):
            PLR(method=method, classes="observed", teachers=4, unit_ball="normalize",
                **_kw(method)).fit(Xtr, ytr)
    for method in ["non-private", "model-sensitivity", "loss-perturbation", "dp-sgd"]:
        with pytest.raises(ValueError, match=rf"^budget does not apply to {method}: .*prediction-sensitivity and subsample-aggregate only"):
            PLR(method=method, classes="observed", budget=10, unit_ball="normalize",
                **_kw(method)).fit(Xtr, ytr)
    m = PLR(method="subsample-aggregate", epsilon=10, budget=10, teachers=4,
            classes="observed", unit_ball="normalize").fit(Xtr, ytr)
    assert m.info_["teachers"] == 4


def test_a_refused_parameter_is_refused_before_the_odometer_is_charged(digits, tmp_path):
    Xtr, _, ytr, _ = digits
    odo = str(tmp_path / "odometer.sqlite")
    privpred.odometer.set_limit(odo, 5.0, key="digits")
    with pytest.raises(ValueError, match="^clip does not apply"):
        PLR(method="model-sensitivity", epsilon=1.0, clip=0.5, classes="observed",
            unit_ball="normalize", odometer=odo, odometer_key="digits").fit(Xtr, ytr)
    with pytest.raises(ValueError, match="schema="):
        PLR(method="model-sensitivity", epsilon=1.0, classes="observed", odometer=odo,
            odometer_key="digits").fit(Xtr, ytr)
    (record,) = privpred.odometer.show(odo, "digits")
    assert record["spent"]["fits"] == 0, record  # nothing was charged


def test_the_cli_refuses_the_same_flags_with_the_same_rule(tmp_path):
    for method, flag, value in [("model-sensitivity", "--teachers", "4"),
                                ("loss-perturbation", "--epochs", "3"),
                                ("model-sensitivity", "--clip", "0.5")]:
        r = cli("train", method, "--dataset", "digits", "--epsilon", "1", flag, value,
                "--out", str(tmp_path / "m.safetensors"), check=False)
        assert r.returncode == 2, r.stderr
        assert f"{flag} does not apply to {method}" in r.stderr, r.stderr


def test_epochs_out_of_range_is_a_value_error_naming_epochs_and_the_range(digits):
    Xtr, _, ytr, _ = digits
    for epochs in (1e9, 10_001, float("inf")):
        with pytest.raises((ValueError,)) as e:
            PLR(method="dp-sgd", epsilon=1, delta=1e-5, epochs=epochs, classes="observed",
                unit_ball="normalize").fit(Xtr, ytr)
        assert "epochs" in str(e.value) and not isinstance(e.value, RuntimeError)
    with pytest.raises(ValueError, match=r"invalid epochs = 1000000000: must be a number in \(0, 10000\]"):
        PLR(method="dp-sgd", epsilon=1, delta=1e-5, epochs=1e9, classes="observed",
            unit_ball="normalize").fit(Xtr, ytr)


def test_an_epsilon_no_noise_multiplier_meets_is_a_value_error_naming_epsilon():
    with pytest.raises(ValueError, match=r"invalid epsilon = 0\.0001: no noise multiplier up to 1e6 reaches it"):
        privpred.calibrate("dp-sgd", epsilon=1e-4, delta=1e-5, n=1000, batch_size=1000, epochs=10_000)


@pytest.mark.parametrize("param", ["budget", "teachers", "batch_size", "public_n"])
def test_a_count_too_large_for_the_core_is_named_with_its_range(digits, param):
    Xtr, _, ytr, _ = digits
    method = {"budget": "prediction-sensitivity", "teachers": "subsample-aggregate",
              "batch_size": "dp-sgd", "public_n": "loss-perturbation"}[param]
    kw = dict(_kw(method))
    if param == "public_n":
        kw["neighbours"] = "add-remove"
    kw[param] = 10**30
    with pytest.raises(ValueError, match=param):
        PLR(method=method, classes="observed", unit_ball="normalize", **kw).fit(Xtr, ytr)


def test_n_jobs_beyond_the_thread_limit_is_named_with_its_range(digits):
    Xtr, _, ytr, _ = digits
    with pytest.raises(ValueError, match=r"invalid n_jobs = 100000: must be a number of threads in 1\.\.=1024"):
        PLR(method="non-private", unit_ball="normalize", n_jobs=100_000).fit(Xtr, ytr)
    PLR(method="non-private", unit_ball="normalize", n_jobs=-100_000).fit(Xtr, ytr)  # at least one
