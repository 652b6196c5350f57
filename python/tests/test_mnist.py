"""MNIST through the command line's loader and cache: the Python estimator and
`privpred train` agree on the same experiment (same seed, same noise draws)."""

from __future__ import annotations

import pytest

import privpred
from conftest import cli, cli_json, dataset_or_skip


@pytest.mark.parametrize("method", ["model-sensitivity", "loss-perturbation"])
def test_python_and_cli_agree_on_mnist(tmp_path, method):
    Xtr, ytr, Xte, yte, prov = dataset_or_skip("mnist", f"test_python_and_cli_agree_on_mnist[{method}]")
    assert prov["verified"] and Xtr.shape == (60000, 784) and Xte.shape == (10000, 784)
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", method=method, epsilon=1.0, lam=1e-2, random_state=11)
    acc_py = est.fit(Xtr, ytr).score(Xte, yte)
    m = tmp_path / "cli.safetensors"
    cli("train", method, "--dataset", "mnist", "--epsilon", "1", "--lambda", "1e-2", "--seed", "11",
        "--out", str(m))
    acc_cli = cli_json("evaluate", "--model", str(m), "--dataset", "mnist")["accuracy"]["mean"]
    # The same seed draws the same noise in both; the only difference is the CLI's pixel
    # scale 1/255 before x/||x|| (Python: scale 1), a last-bit rounding of the unit rows.
    assert acc_py == pytest.approx(acc_cli, abs=0.005), (acc_py, acc_cli)
    # a useful private model at epsilon = 1 (chance is 0.1; floor well below the observed)
    assert acc_py > 0.5
    # a seeded file is an experiment: Python loads it only when opted in, as the CLI refuses it
    assert privpred.load(m, allow_seeded=True).guarantee_["assumptions"]["n"] == est.guarantee_["assumptions"]["n"]
