"""Errors raised from Python name Python's parameters (``batch_size``, ``lam``, ``public_n``,
…), never the command line's flags (``--batch-size``, ``--lambda``) or their kebab-case
names (``batch-size``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from privpred import PrivateLogisticRegression as PLR

KEBAB_FLAGS = re.compile(
    r"--[a-z]|\b(batch-size|public-n|learning-rate|noise-multiplier|sampling-rate|cv-draws)\b"
)


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(100, 4))
    y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    return X, y


def _message(est, X, y) -> str:
    with pytest.raises(ValueError) as e:
        est.fit(X, y)
    msg = str(e.value)
    assert not KEBAB_FLAGS.search(msg), msg
    return msg


def test_a_batch_larger_than_the_data_names_batch_size(small):
    X, y = small
    est = PLR(unit_ball="normalize", classes="observed", method="dp-sgd", epsilon=1.0, delta=1e-5, batch_size=500, epochs=1)
    msg = _message(est, X, y)
    assert "batch_size" in msg and "500" in msg, msg


def test_more_teachers_than_rows_names_teachers(small):
    X, y = small
    est = PLR(unit_ball="normalize", classes="observed", method="subsample-aggregate", epsilon=1.0, budget=10, teachers=1000)
    msg = _message(est, X, y)
    assert "teachers" in msg and "1000" in msg, msg


def test_add_remove_without_its_public_size_names_public_n(small):
    X, y = small
    est = PLR(unit_ball="normalize", classes="observed", method="loss-perturbation", epsilon=1.0, neighbours="add-remove")
    msg = _message(est, X, y)
    assert "public_n" in msg, msg


def test_a_public_size_under_replace_one_names_public_n(small):
    X, y = small
    est = PLR(unit_ball="normalize", classes="observed", method="loss-perturbation", epsilon=1.0, public_n=100)
    msg = _message(est, X, y)
    assert "public_n" in msg, msg


def test_a_lambda_out_of_range_names_lam(small):
    X, y = small
    est = PLR(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=1.0, lam=1e9)
    msg = _message(est, X, y)
    assert "lam" in msg and "lambda =" not in msg, msg


def test_a_schedule_out_of_range_names_the_python_parameter(small):
    X, y = small
    for params, name in [
        ({"epochs": -1.0}, "epochs"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"clip": -1.0}, "clip"),
    ]:
        est = PLR(unit_ball="normalize", classes="observed", method="dp-sgd", epsilon=1.0, delta=1e-5, batch_size=10, **params)
        msg = _message(est, X, y)
        assert name in msg, (params, msg)
