"""privpred.Client against a real `privpred serve` (started here, on a loopback port, with a
fresh SQLite ledger) serving a model trained in Python."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import privpred
from conftest import cli_path


class Server:
    def __init__(self, model, tmp_path, *extra):
        self.err = open(tmp_path / "serve.stderr", "w")
        self.proc = subprocess.Popen(
            [str(cli_path()), "serve", "--model", str(model), "--listen", "127.0.0.1:0",
             "--ledger", f"sqlite:{tmp_path / 'ledger.sqlite'}", "--init-ledger", *extra],
            stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL, text=True,
        )
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.proc.wait(timeout=10)
            raise AssertionError(f"privpred serve did not start: {(tmp_path / 'serve.stderr').read_text()}")
        self.url = line.removeprefix("listening on ")

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.err.close()


@pytest.fixture
def served(tmp_path, digits):
    servers = []

    def start(est, *extra):
        m = tmp_path / "model.safetensors"
        est.save(m)
        s = Server(m, tmp_path, *extra)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def test_client_spends_the_budget_and_raises_budget_exhausted_on_429(served, digits):
    Xtr, Xte, ytr, yte = digits
    est = privpred.PrivateLogisticRegression(classes="observed", method="subsample-aggregate", epsilon=50.0,
                                             budget=20, teachers=8).fit(Xtr, ytr)
    s = served(est)
    c = privpred.Client(s.url)
    assert c.model()["method"] == "subsample-aggregate"
    labels, left = c.predict(Xte[:15])
    assert labels.shape == (15,) and left == 5
    assert (est.classes_[labels] == yte[:15]).mean() > 0.3
    with pytest.raises(privpred.BudgetExhausted, match="needs 6 new answers but only 5 remain"):
        c.predict(Xte[15:21])
    labels, left = c.predict(Xte[15:20])
    assert left == 0
    # repeated rows come from the server's answer store, free
    again, left = c.predict(Xte[:3])
    assert left == 0
    with pytest.raises(privpred.BudgetExhausted, match="exhausted"):
        c.predict(Xte[30:31])
    with pytest.raises(ValueError, match="422"):
        c.predict(Xte[:1, :10])


def test_client_with_a_token_and_a_released_model(served, digits, tmp_path):
    Xtr, Xte, ytr, _ = digits
    est = privpred.PrivateLogisticRegression(classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, ytr)
    tokens = tmp_path / "tokens"
    tokens.write_text("s3cret-token\n")
    s = served(est, "--tokens", str(tokens))
    with pytest.raises(PermissionError, match="401"):
        privpred.Client(s.url).predict(Xte[:2])
    labels, left = privpred.Client(s.url, token="s3cret-token").predict(Xte[:40])
    assert left is None  # a privately trained model answers without a budget
    np.testing.assert_array_equal(est.classes_[labels], est.predict(Xte[:40]))


def test_client_refuses_a_nan_naming_the_row_before_sending(served, digits):
    Xtr, Xte, ytr, _ = digits
    est = privpred.PrivateLogisticRegression(classes="observed", method="subsample-aggregate", epsilon=50.0,
                                             budget=5, teachers=8).fit(Xtr, ytr)
    s = served(est)
    c = privpred.Client(s.url)
    X = Xte[:4].copy()
    X[2, 14] = np.nan
    with pytest.raises(ValueError, match=r"row 2 has a non-finite value \(nan\) in column 14"):
        c.predict(X)
    X[2, 14] = np.inf
    with pytest.raises(ValueError, match="row 2"):
        c.predict(X)
    assert c.model()["budget"]["remaining"] == 5  # nothing was sent


def test_client_returns_the_models_own_string_labels(served, digits, tmp_path):
    Xtr, Xte, ytr, yte = digits
    names = np.array([f"digit-{k}" for k in range(10)])
    est = privpred.PrivateLogisticRegression(classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, names[ytr])
    s = served(est)
    # from the served file's stored labels (checked to be the served model) ...
    labels, _ = privpred.Client(s.url, classes=tmp_path / "model.safetensors").predict(Xte[:30])
    np.testing.assert_array_equal(labels, est.predict(Xte[:30]))
    assert labels.dtype.kind == "U"
    # ... or from the labels themselves
    labels, _ = privpred.Client(s.url, classes=est.classes_).predict(Xte[:30])
    np.testing.assert_array_equal(labels, est.predict(Xte[:30]))
    # without them: the server's indices
    idx, _ = privpred.Client(s.url).predict(Xte[:30])
    np.testing.assert_array_equal(est.classes_[idx], labels)
    with pytest.raises(ValueError, match="labels for a served model of 10 classes"):
        privpred.Client(s.url, classes=["a", "b"]).predict(Xte[:1])
    other = privpred.PrivateLogisticRegression(classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, ytr)
    other.save(tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match="not this file's"):
        privpred.Client(s.url, classes=tmp_path / "other.safetensors").predict(Xte[:1])
