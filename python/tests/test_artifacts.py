"""Artifacts shared with the command line: a model trained in Python is read by
`privpred evaluate` / `predict`, one trained by `privpred train` is read by privpred.load,
with identical answers and guarantees."""

from __future__ import annotations

import json

import numpy as np
import pytest

import privpred
from conftest import cli, cli_json, dataset_or_skip


def _csv(path, X):
    np.savetxt(path, X, delimiter=",", fmt="%.9g")
    return str(path)


def test_python_model_is_read_by_the_cli(tmp_path):
    Xtr, ytr, Xte, yte, _ = dataset_or_skip("digits", "test_python_model_is_read_by_the_cli")
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, ytr)
    assert est.release_ == "private-release"
    m = tmp_path / "py.safetensors"
    est.save(m)
    ev = cli_json("evaluate", "--model", str(m), "--dataset", "digits")
    assert ev["accuracy"]["mean"] == pytest.approx(est.score(Xte, yte), abs=1e-12)
    pr = cli_json("predict", "--model", str(m), "--input", _csv(tmp_path / "q.csv", Xte[:50]))
    labels = [a["label"] for a in pr["answers"]]
    np.testing.assert_array_equal(labels, est.predict(Xte[:50]))
    scores = np.array([a["scores"] for a in pr["answers"]])
    # the CLI's per-row path computes logits in f64, the batch path in the f32 kernel
    np.testing.assert_allclose(scores, est._native.logits_of(Xte[:50]), rtol=1e-5, atol=1e-5)


def test_cli_model_is_read_by_python_with_the_same_answers_and_guarantee(tmp_path):
    Xtr, ytr, Xte, yte, _ = dataset_or_skip("digits", "test_cli_model_is_read_by_python")
    m = tmp_path / "cli.safetensors"
    cli("train", "loss-perturbation", "--dataset", "digits", "--epsilon", "3", "--lambda", "1e-3",
        "--calibration", "tight", "--out", str(m))
    est = privpred.load(m)
    assert est.method == "loss-perturbation" and est.release_ == "private-release"
    g = est.guarantee_
    assert (g["epsilon"], g["calibration"], g["assumptions"]["n"]) == (3.0, "tight", len(Xtr))
    # the guarantee the CLI's calibrate computes for the same request, field for field
    # (the trained model's noise includes the certified minimiser's slack, erratum 4.8,
    # so compare the request fields and the relation, not the noise)
    c = cli_json("calibrate", "loss-perturbation", "--epsilon", "3", "--n", str(len(Xtr)),
                 "--lambda", "1e-3", "--calibration", "tight")
    assert set(c) <= set(g) | {"rho"}
    for k in ("method", "calibration", "neighbours", "epsilon", "delta", "budget", "budget_unlimited", "valid_guarantee"):
        assert g[k] == c[k], k
    pr = cli_json("predict", "--model", str(m), "--input", _csv(tmp_path / "q.csv", Xte[:50]))
    np.testing.assert_array_equal([a["label"] for a in pr["answers"]], est.predict(Xte[:50]))
    ev = cli_json("evaluate", "--model", str(m), "--dataset", "digits")
    assert ev["accuracy"]["mean"] == pytest.approx(est.score(Xte, yte), abs=1e-12)


def test_save_load_round_trip_keeps_classes_and_answers(tmp_path, digits):
    Xtr, Xte, ytr, _ = digits
    names = np.array(list("abcdefghij"))
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="dp-sgd", epsilon=4.0, delta=1e-5, clip=0.1,
                                             epochs=2).fit(Xtr, names[ytr])
    est.save(tmp_path / "m.safetensors")
    back = privpred.load(tmp_path / "m.safetensors")
    assert back.guarantee_ == est.guarantee_
    np.testing.assert_array_equal(back.classes_, est.classes_)
    np.testing.assert_array_equal(back.predict(Xte), est.predict(Xte))
    assert back.get_params()["method"] == "dp-sgd"


def test_seeded_model_is_an_experiment_the_cli_refuses_to_serve(tmp_path, digits):
    Xtr, Xte, ytr, _ = digits
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3, random_state=3).fit(Xtr, ytr)
    m = tmp_path / "seeded.safetensors"
    est.save(m)
    r = cli("predict", "--model", str(m), "--input", _csv(tmp_path / "q.csv", Xte[:3]), check=False)
    assert r.returncode == 2 and "experiment, not a private release" in r.stderr
    # Python refuses it the same way, unless opted in
    with pytest.raises(ValueError, match="not a private release"):
        privpred.load(m)
    assert privpred.load(m, allow_seeded=True).release_ == "experiment"


def test_loaded_budgeted_model_answers_only_through_the_files_ledger(tmp_path, digits):
    Xtr, Xte, ytr, _ = digits
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="prediction-sensitivity", epsilon=5.0,
                                             budget=5, lam=1e-3).fit(Xtr, ytr)
    est.save(tmp_path / "ps.safetensors")
    back = privpred.load(tmp_path / "ps.safetensors")
    assert back.guarantee_["budget"] == 5
    # it answers through the ledger `privpred predict` uses for the file, which must exist
    with pytest.raises(RuntimeError, match="init_ledger=True"):
        back.predict(Xte[:1])
    assert not (tmp_path / "ps.safetensors.ledger.sqlite").exists()


def test_corrupt_artifacts_are_refused_with_the_cli_message(tmp_path, digits):
    Xtr, _, ytr, _ = digits
    m = tmp_path / "m.safetensors"
    privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, ytr).save(m)
    b = bytearray(m.read_bytes())
    b[-3] ^= 0xFF
    m.write_bytes(bytes(b))
    with pytest.raises(ValueError) as e:
        privpred.load(m)
    r = cli("evaluate", "--model", str(m), "--dataset", "digits", check=False)
    assert r.returncode == 2 and str(e.value) in r.stderr
    with pytest.raises(OSError):
        privpred.load(tmp_path / "missing.safetensors")
