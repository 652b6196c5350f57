"""Two-class problems as one sigmoid output (``binary``): which model is trained, its
guarantee's constants (K = 1, L = 1/4; Chaudhuri, Monteleoni & Sarwate 2011, Corollary 8:
beta = N lambda epsilon / 2 for output perturbation), the one-output layout, and refusals."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from privpred import PrivateLogisticRegression as PLR


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    bounds = 10.0 ** np.ceil(np.log10(X.max(axis=0)))  # public per-feature bounds
    return X / bounds, y


def test_auto_trains_the_sigmoid_model_for_two_classes(cancer):
    X, y = cancer
    est = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=10.0, lam=0.01, binary="auto", random_state=0)
    est.fit(X, y)
    g = est.guarantee_
    assert g["assumptions"]["loss"] == "logistic"
    assert g["assumptions"]["K"] == 1.0 and g["assumptions"]["L"] == 0.25
    # Corollary 8 (beta = N lambda eps / 2), over the certificate's 1 % residual term
    want = len(X) * 0.01 * 10.0 / 2.0 / 1.01
    assert abs(g["noise"]["beta"] - want) < 1e-9 * want
    assert np.all(est.theta_[:, 0] == 0.0)  # one output column: (0, w)
    s = est.decision_function(X)
    assert s.shape == (len(X),)
    np.testing.assert_array_equal(est.predict(X), est.classes_[(s > 0).astype(int)])
    p = est.predict_proba(X)
    np.testing.assert_allclose(p[:, 1], 1.0 / (1.0 + np.exp(-s)), rtol=1e-9)


def test_binary_false_keeps_the_softmax_and_its_noise_is_larger(cancer):
    X, y = cancer
    a = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=1.0, lam=0.01, binary=False, random_state=0)
    b = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=1.0, lam=0.01, binary=True, random_state=0)
    ga, gb = a.fit(X, y).guarantee_, b.fit(X, y).guarantee_
    assert ga["assumptions"]["loss"] == "softmax"
    assert gb["noise"]["beta"] / ga["noise"]["beta"] == pytest.approx(np.sqrt(2), rel=1e-12)


def test_prediction_sensitivity_answers_on_one_score(cancer):
    X, y = cancer
    est = PLR(unit_ball="normalize", classes="observed", method="prediction-sensitivity", epsilon=10.0, lam=0.01, budget=50, binary=True,
              random_state=1, allow_seeded=True)
    est.fit(X, y)
    assert est.guarantee_["assumptions"]["loss"] == "logistic"
    assert est.predict(X[:20]).shape == (20,)


def test_loss_perturbation_trains_the_sigmoid_model(cancer):
    """Chaudhuri, Monteleoni & Sarwate (2011), Algorithm 2 with c = 1/4 (Section 3.4): the
    regulariser floor rho = max(2c / eps', N lam) and, under replace-one (b's sensitivity 2),
    the noise spends what the rank-one Jacobian term ln(1 + c / rho) leaves:
    beta = (eps' - ln(1 + c / rho)) / 2, eps' = 0.99 eps (the certificate's residual share);
    the softmax's floor would be max(2 / eps', N lam)."""
    X, y = cancer
    est = PLR(unit_ball="normalize", classes="observed", method="loss-perturbation", epsilon=2.0, lam=0.001, binary=True, random_state=0)
    est.fit(X, y)
    g = est.guarantee_
    assert g["assumptions"]["loss"] == "logistic"
    e1 = 0.99 * 2.0
    n = g["assumptions"]["n"]
    rho = max(2 * 0.25 / e1, n * 0.001)
    assert g["rho"] == pytest.approx(rho, rel=1e-12)
    assert g["noise"]["beta"] == pytest.approx((e1 - np.log1p(0.25 / rho)) / 2.0, rel=1e-9)
    # never less noise than the fixed split's beta = eps' / 4 allows
    assert g["noise"]["beta"] >= e1 / 4.0
    assert np.all(est.theta_[:, 0] == 0.0)
    soft = PLR(unit_ball="normalize", classes="observed", method="loss-perturbation", epsilon=2.0, lam=0.001, binary=False,
               random_state=0).fit(X, y).guarantee_
    assert soft["rho"] == pytest.approx(max(2.0 / e1, n * 0.001), rel=1e-12)


def test_refusals(cancer, digits):
    X, y = cancer
    with pytest.raises(ValueError, match="binary"):
        PLR(unit_ball="normalize", classes="observed", method="subsample-and-aggregate", epsilon=1.0, lam=0.01, binary=True).fit(X, y)
    with pytest.raises(ValueError, match="binary"):
        PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=0.01, binary="yes").fit(X, y)
    Xtr, _, ytr, _ = digits
    with pytest.raises(ValueError, match="binary"):
        PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=0.01, binary=True).fit(Xtr, ytr)
    # auto keeps the softmax for ten classes and for the methods without a sigmoid model;
    # the default is auto (the sigmoid model for two classes); False keeps the softmax
    est = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=0.01, binary="auto").fit(Xtr, ytr)
    assert est.guarantee_["assumptions"]["loss"] == "softmax"
    est = PLR(unit_ball="normalize", classes="observed", method="subsample-and-aggregate", epsilon=1.0, lam=0.01, budget=5,
              binary="auto").fit(X, y)
    assert est.guarantee_["assumptions"]["loss"] == "softmax"
    est = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=0.01).fit(X, y)
    assert est.guarantee_["assumptions"]["loss"] == "logistic"
    est = PLR(unit_ball="normalize", classes="observed", epsilon=1.0, lam=0.01, binary=False).fit(X, y)
    assert est.guarantee_["assumptions"]["loss"] == "softmax"


def test_dp_sgd_trains_the_sigmoid_model(cancer):
    X, y = cancer
    est = PLR(unit_ball="normalize", classes="observed", method="dp-sgd", epsilon=10.0, delta=1e-5, clip=0.5, binary="auto", random_state=0)
    est.fit(X, y)
    assert est.guarantee_["assumptions"]["loss"] == "logistic"
    assert np.all(est.theta_[:, 0] == 0.0)
    assert est.decision_function(X).shape == (len(X),)
