"""How the estimator chooses lambda and what its guarantee says of it; loading a model whose
guarantee is not valid needs allow_invalid_guarantee=True."""

from __future__ import annotations

import pytest

import privpred
from privpred import PrivateLogisticRegression as PLR


def test_the_default_lambda_is_the_public_rule_and_costs_nothing(digits):
    Xtr, _, ytr, _ = digits
    g = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=1.0).fit(Xtr, ytr).guarantee_
    assert g["selection"] == {"method": "public-rule", "epsilon": 0.0, "delta": 0.0,
                              "composition": "none"}
    assert g["valid_guarantee"] is True
    assert 1e-6 <= g["assumptions"]["lambda"] <= 1
    # under add-remove neighbours the exact N is private: the rule reads the declared N-hat, so
    # another N-hat gives another lambda and the same N-hat the same one (loss perturbation at a
    # small epsilon, where its analysis holds: rho = 2LC/epsilon >= N-hat lambda)
    def ar(X, y, n_hat):
        return PLR(unit_ball="normalize", classes="observed", method="loss-perturbation", epsilon=0.1,
                   neighbours="add-remove", public_n=n_hat).fit(X, y).guarantee_
    g = ar(Xtr, ytr, len(ytr))
    assert g["selection"]["method"] == "public-rule"
    assert g["selection"]["epsilon"] == 0.0
    assert ar(Xtr[:-7], ytr[:-7], len(ytr))["assumptions"]["lambda"] == g["assumptions"]["lambda"]
    assert ar(Xtr, ytr, 4 * len(ytr))["assumptions"]["lambda"] < g["assumptions"]["lambda"]


def test_the_private_selection_is_inside_the_guarantee(digits):
    Xtr, _, ytr, _ = digits
    est = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=1.0, lam="private").fit(Xtr, ytr)
    g = est.guarantee_
    assert g["selection"]["method"] == "private-split"
    assert g["selection"]["epsilon"] == 1.0 and g["selection"]["composition"] == "parallel"
    assert g["valid_guarantee"] is True
    # the release trains on the part the selection does not use
    assert g["assumptions"]["n"] < len(Xtr)


def test_the_papers_selection_is_outside_the_guarantee_and_load_refuses_it(digits, tmp_path):
    Xtr, _, ytr, _ = digits
    est = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=1.0, lam="cv").fit(Xtr, ytr)
    g = est.guarantee_
    assert g["selection"]["method"] == "non-private-holdout"
    assert g["selection"]["epsilon"] is None
    assert g["valid_guarantee"] is False
    p = tmp_path / "cv.safetensors"
    est.save(p)
    with pytest.raises(ValueError, match="allow_invalid_guarantee"):
        privpred.load(p)
    back = privpred.load(p, allow_invalid_guarantee=True)
    assert back.guarantee_["valid_guarantee"] is False


def test_a_paper_calibration_is_refused_on_load_unless_allowed(digits, tmp_path):
    Xtr, _, ytr, _ = digits
    est = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=1.0, lam=0.01, calibration="paper").fit(Xtr, ytr)
    assert est.guarantee_["valid_guarantee"] is False
    p = tmp_path / "paper.safetensors"
    est.save(p)
    with pytest.raises(ValueError, match="valid_guarantee: false"):
        privpred.load(p)
    assert privpred.load(p, allow_invalid_guarantee=True).guarantee_["calibration"] == "paper"
    # a valid one loads as before
    ok = tmp_path / "ok.safetensors"
    PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=1.0).fit(Xtr, ytr).save(ok)
    assert privpred.load(ok).guarantee_["valid_guarantee"] is True
