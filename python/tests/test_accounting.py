"""Accounting: privpred.calibrate against `privpred calibrate --json` (field for field), and
the DP-SGD accountants against Google's dp-accounting (an independent implementation,
installed from PyPI in the test environment)."""

from __future__ import annotations

import pytest

import privpred
from privpred import accounting
from conftest import cli_json

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting import NeighboringRelation, dp_event  # noqa: E402
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant  # noqa: E402


@pytest.mark.parametrize(
    "method,args,kw",
    [
        ("model-sensitivity", ["--n", "60000", "--lambda", "1e-4"], {"n": 60000, "lam": 1e-4}),
        ("loss-perturbation", ["--n", "60000", "--lambda", "1e-4", "--calibration", "tight"],
         {"n": 60000, "lam": 1e-4, "calibration": "tight"}),
        ("loss-perturbation", ["--n", "1000", "--lambda", "1e-3", "--neighbours", "add-remove"],
         {"n": 1000, "lam": 1e-3, "neighbours": "add-remove"}),
        ("prediction-sensitivity", ["--n", "60000", "--lambda", "1e-4", "--budget", "100", "--delta", "1e-5"],
         {"n": 60000, "lam": 1e-4, "budget": 100, "delta": 1e-5}),
        ("subsample-aggregate", ["--budget", "1000", "--calibration", "paper"],
         {"budget": 1000, "calibration": "paper"}),
        ("dp-sgd", ["--n", "60000", "--delta", "1e-5", "--batch-size", "256", "--epochs", "20"],
         {"n": 60000, "delta": 1e-5, "batch_size": 256, "epochs": 20}),
    ],
)
def test_calibrate_is_the_cli_calibrate_json(method, args, kw):
    ours = privpred.calibrate(method, epsilon=1.0, **kw)
    theirs = cli_json("calibrate", method, "--epsilon", "1", *args)
    assert ours == theirs


def test_calibrate_errors_are_value_errors_with_the_cli_message():
    with pytest.raises(ValueError, match=r"invalid epsilon = 0: must be a finite number > 0"):
        privpred.calibrate("model-sensitivity", epsilon=0.0, n=10, lam=1.0)
    with pytest.raises(ValueError, match="batch_size"):
        privpred.calibrate("dp-sgd", epsilon=1.0, delta=1e-5, n=100)


def _event(q, sigma, steps):
    return dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps
    )


# (q, sigma, steps, delta): Opacus's MNIST example, the paper's linear DP-SGD schedule
# (b = 256 of N = 60,000, 20 epochs), a large-q and a low-noise setting
SETTINGS = [
    (0.01, 1.1, 1000, 1e-5),
    (256 / 60000, 0.8, 4688, 1e-5),
    (0.1, 2.0, 100, 1e-6),
    (0.004, 4.0, 10000, 1e-5),
]


@pytest.mark.parametrize("q,sigma,steps,delta", SETTINGS)
def test_rdp_matches_dp_accounting(q, sigma, steps, delta):
    a = rdp_privacy_accountant.RdpAccountant()
    a.compose(_event(q, sigma, steps))
    theirs = a.get_epsilon(delta)
    ours = accounting.epsilon_dp_sgd(q, sigma, steps, delta, accountant="rdp", neighbours="add-remove")
    # same bound up to the order grids: relative 1e-4 (observed below 1e-5)
    assert ours == pytest.approx(theirs, rel=1e-4)


@pytest.mark.parametrize("q,sigma,steps,delta", SETTINGS)
@pytest.mark.parametrize("relation", ["add-remove", "replace-one"])
def test_pld_matches_dp_accounting(q, sigma, steps, delta, relation):
    rel = {"add-remove": NeighboringRelation.ADD_OR_REMOVE_ONE,
           "replace-one": NeighboringRelation.REPLACE_ONE}[relation]
    a = pld_privacy_accountant.PLDAccountant(neighboring_relation=rel)
    a.compose(_event(q, sigma, steps))
    theirs = a.get_epsilon(delta)
    ours = accounting.epsilon_dp_sgd(q, sigma, steps, delta, accountant="pld", neighbours=relation)
    # both pessimistic discretisations of the same distribution, different grids:
    # relative 1e-3 (observed below 1e-4)
    assert ours == pytest.approx(theirs, rel=1e-3)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_get_noise_multiplier_meets_the_target_tightly(accountant):
    q, steps, delta, target = 0.01, 1000, 1e-5, 1.0
    sigma = accounting.get_noise_multiplier(target_epsilon=target, target_delta=delta,
                                            sample_rate=q, steps=steps, accountant=accountant,
                                            neighbours="add-remove")
    make = (rdp_privacy_accountant.RdpAccountant if accountant == "rdp"
            else pld_privacy_accountant.PLDAccountant)

    def eps(s):
        a = make()
        a.compose(_event(q, s, steps))
        return a.get_epsilon(delta)

    assert eps(sigma) <= target * (1 + 1e-3)  # never above the target (up to the grids)
    assert eps(sigma - 2e-3) > target  # and the smallest such sigma to ~1e-3
    # Opacus's epochs form: steps = int(epochs / sample_rate)
    assert accounting.get_noise_multiplier(target, delta, q, epochs=10, accountant=accountant,
                                           neighbours="add-remove") == sigma


def test_accountant_argument_errors():
    with pytest.raises(ValueError, match="invalid sample_rate = 1.5: must be in \\(0, 1\\]"):
        accounting.epsilon_dp_sgd(1.5, 1.0, 10, 1e-5)
    with pytest.raises(ValueError, match="bounds add-remove neighbours only"):
        accounting.epsilon_dp_sgd(0.01, 1.0, 10, 1e-5, accountant="rdp", neighbours="replace-one")
    with pytest.raises(ValueError, match="invalid accountant = gdp"):
        accounting.epsilon_dp_sgd(0.01, 1.0, 10, 1e-5, accountant="gdp")
    with pytest.raises(ValueError, match="give steps"):
        accounting.get_noise_multiplier(1.0, 1e-5, 0.01)


def test_every_function_defaults_to_replace_one_and_agrees_with_calibrate():
    """One default everywhere: the same DP-SGD request gives calibrate's sigma."""
    import inspect
    import math

    for fn in (accounting.calibrate, accounting.epsilon_dp_sgd, accounting.get_noise_multiplier):
        assert inspect.signature(fn).parameters["neighbours"].default == "replace-one", fn
        assert "replace-one" in fn.__doc__
    assert inspect.signature(privpred.PrivateLogisticRegression).parameters["neighbours"].default == "replace-one"
    n, b, epochs, eps, delta = 60000, 256, 20, 1.0, 1e-5
    g = privpred.calibrate("dp-sgd", epsilon=eps, delta=delta, n=n, batch_size=b, epochs=epochs)
    assert g["neighbours"] == "replace-one"
    sigma = g["noise_multiplier"]
    steps = math.ceil(epochs * n / b)
    assert g["steps"] == steps
    assert accounting.get_noise_multiplier(eps, delta, b / n, steps=steps) == pytest.approx(sigma, abs=2e-4)
    spent = accounting.epsilon_dp_sgd(b / n, sigma, steps, delta)
    assert spent <= eps * (1 + 1e-9) and spent > 0.95 * eps
    # the same under Opacus's relation, asked for explicitly: less noise, a weaker guarantee
    ar = accounting.get_noise_multiplier(eps, delta, b / n, steps=steps, neighbours="add-remove")
    assert ar < sigma
    # independent: Google's dp-accounting, replace-one PLD, at calibrate's sigma
    a = pld_privacy_accountant.PLDAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    a.compose(_event(b / n, sigma, steps))
    assert a.get_epsilon(delta) <= eps * (1 + 1e-3)
