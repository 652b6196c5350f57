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
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="subsample-aggregate", epsilon=50.0,
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
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, ytr)
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
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="subsample-aggregate", epsilon=50.0,
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
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, names[ytr])
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
    other = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, ytr)
    other.save(tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match="not this file's"):
        privpred.Client(s.url, classes=tmp_path / "other.safetensors").predict(Xte[:1])


TABLE_SCHEMA = {
    "privpred_schema": 1,
    "header": True,
    "columns": [
        {"name": "age", "type": "numeric", "min": 0, "max": 120},
        {"name": "colour", "type": "categorical", "categories": ["red", "green", "blue"]},
        {"name": "note", "type": "ignore"},
        {"name": "dose", "type": "numeric", "min": 0, "max": 10, "out_of_bounds": "clip"},
        {"name": "outcome", "type": "label", "classes": ["no", "yes"]},
    ],
}


def _table(n, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.uniform(0, 120, n).round(1)
    colour = rng.choice(["red", "green", "blue"], n)
    dose = rng.uniform(0, 10, n).round(2)
    note = np.array([f"n{i}" for i in range(n)], dtype=object)
    y = np.where((colour == "red") | (age > 90), "yes", "no")
    return age, colour, note, dose, y


def test_client_sends_a_table_models_cells_by_column_name(served, tmp_path):
    pd = pytest.importorskip("pandas")
    age, colour, note, dose, y = _table(400)
    df = pd.DataFrame({"age": age, "colour": colour, "note": note, "dose": dose})
    est = privpred.PrivateLogisticRegression(epsilon=50.0, lam=1e-3, schema=TABLE_SCHEMA).fit(df, y)
    s = served(est)
    c = privpred.Client(s.url, classes=est.classes_)
    # the service describes the query row: the schema's columns without the label
    assert c.model()["columns"] == [
        {"name": "age", "type": "numeric"},
        {"name": "colour", "type": "categorical"},
        {"name": "note", "type": "ignore"},
        {"name": "dose", "type": "numeric"},
    ]
    q = df.iloc[:40]
    want = est.predict(q)  # a released model: the server's answers are its argmax
    # by name, whatever the order, extra columns (the label among them) not sent
    shuffled = q[["dose", "note", "colour", "age"]].assign(outcome=y[:40], extra=1.5)
    labels, left = c.predict(shuffled)
    np.testing.assert_array_equal(labels, want)
    assert left is None
    # category strings stay strings: rows in the schema's order, as lists or object arrays
    rows = [[a, col, n, d] for a, col, n, d in zip(age[:40], colour[:40], note[:40], dose[:40])]
    np.testing.assert_array_equal(c.predict(rows)[0], want)
    np.testing.assert_array_equal(c.predict(np.array(rows, dtype=object))[0], want)
    # a pandas categorical column is read by its values
    cat = q.assign(colour=q["colour"].astype("category"))
    np.testing.assert_array_equal(c.predict(cat)[0], want)
    # a missing column is named before anything is sent
    with pytest.raises(ValueError, match=r"column\(s\) `colour` are not among the DataFrame's columns"):
        c.predict(q.drop(columns=["colour"]))
    # an infinite number is refused locally, a missing value and an unknown category by the
    # server, naming the column (HTTP 422: nothing is spent)
    bad = q.copy()
    bad.loc[bad.index[2], "age"] = float("inf")
    with pytest.raises(ValueError, match=r"row 2 has an infinite value .* column `age`"):
        c.predict(bad)
    bad.loc[bad.index[2], "age"] = float("nan")
    with pytest.raises(ValueError, match=r"422 .*age"):
        c.predict(bad)
    with pytest.raises(ValueError, match=r"422 .*colour"):
        c.predict([[30.0, "purple", "x", 1.0]])


def test_client_of_a_numbers_model_reads_no_columns(served, digits):
    Xtr, Xte, ytr, _ = digits
    est = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", epsilon=5.0, lam=1e-3).fit(Xtr, ytr)
    s = served(est)
    c = privpred.Client(s.url)
    assert c.model()["columns"] is None
    labels, _ = c.predict(Xte[:5])
    np.testing.assert_array_equal(est.classes_[labels], est.predict(Xte[:5]))
