"""One answering path for Python and the command line: a budgeted model answers with the
same budget (B = 5) whether it is asked through ``privpred.load``, ``privpred predict`` or
``privpred serve``; backups, spend marks, fresh records, seeds, save/load and pickles never
give it more than B answers."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess

import numpy as np
import pytest

import privpred
from conftest import cli, cli_path

B = 5


def _csv(path, X):
    np.savetxt(path, X, delimiter=",", fmt="%.9g")
    return str(path)


def _model(tmp_path, digits, name="m.safetensors", **kw):
    Xtr, _, ytr, _ = digits
    est = privpred.PrivateLogisticRegression(
        unit_ball="normalize",
        classes="observed", method="prediction-sensitivity", epsilon=5.0, budget=B, lam=1e-3, **kw
    ).fit(Xtr, ytr)
    path = tmp_path / name
    est.save(path)
    return est, path


def _predict(model, tmp_path, X, *flags):
    """``privpred predict`` on the rows X: (exit code, answers, stderr)."""
    q = _csv(tmp_path / f"q{abs(hash(X.tobytes()))}.csv", X)
    r = cli("predict", "--model", str(model), "--input", q, *flags, check=False)
    return r.returncode, len(r.stdout.split()), r.stderr


def _python(model, X, **kw):
    """Answers through ``privpred.load``: the number answered, or the exception."""
    try:
        return len(privpred.load(model, **kw).predict(X))
    except (privpred.BudgetExhausted, RuntimeError, ValueError) as e:
        return e


def _records(model, ledger=None):
    args = ["--ledger", ledger] if ledger else ["--model", str(model)]
    out = cli("ledger", "show", *args, "--json").stdout
    return json.loads(out)["records"]


def test_python_and_predict_and_serve_spend_one_ledger_record(tmp_path, digits):
    Xte = digits[1]
    _, model = _model(tmp_path, digits)
    # Python creates the record in the CLI's default ledger beside the file
    assert len(privpred.load(model, init_ledger=True).predict(Xte[:2])) == 2
    assert (tmp_path / "m.safetensors.ledger.sqlite").is_file()
    c, n, err = _predict(model, tmp_path, Xte[2:4])
    assert (c, n) == (0, 2), err
    # the server opens the same record (no --init-ledger) and has one answer left
    proc = subprocess.Popen(
        [str(cli_path()), "serve", "--model", str(model), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on "), proc.stderr.read() if proc.poll() is not None else line
        client = privpred.Client(line.removeprefix("listening on "))
        _, left = client.predict(Xte[4:5])
        assert left == 0
        with pytest.raises(privpred.BudgetExhausted):
            client.predict(Xte[5:6])
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert isinstance(_python(model, Xte[6:7]), privpred.BudgetExhausted)
    c, _, err = _predict(model, tmp_path, Xte[7:8])
    assert c == 2 and "budget exhausted" in err, err
    recs = _records(model)
    assert len(recs) == 1 and recs[0]["spent"] == B and recs[0]["total"] == B, recs


def test_an_older_backup_is_refused_by_python_and_pythons_answers_raise_the_mark(tmp_path, digits):
    Xte = digits[1]
    _, model = _model(tmp_path, digits)
    c, n, err = _predict(model, tmp_path, Xte[:1], "--init-ledger")
    assert (c, n) == (0, 1), err
    bk = tmp_path / "backup.sqlite"
    cli("ledger", "backup", "--model", str(model), "--out", str(bk))
    # Python answers 3: its answers raise the spend mark beside the model
    assert privpred.load(model).predict(Xte[1:4]).shape == (3,)
    mark = json.loads((tmp_path / "m.safetensors.ledger-mark.json").read_text())
    assert list(mark["spent"].values()) == [4], mark
    # restore the older backup (spent 1) over the ledger
    ledger = tmp_path / "m.safetensors.ledger.sqlite"
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"m.safetensors.ledger.sqlite{suffix}").unlink(missing_ok=True)
    shutil.copy(bk, ledger)
    e = _python(model, Xte[4:8])
    assert isinstance(e, RuntimeError) and "already released" in str(e), e
    c, n, err = _predict(model, tmp_path, Xte[4:8])
    assert (c, n) == (2, 0) and "already released" in err, err
    # raised back to the mark, the ledger has exactly B - 4 left
    cli("ledger", "reconcile", "--model", str(model))
    assert _python(model, Xte[4:5]) == 1
    assert isinstance(_python(model, Xte[5:6]), privpred.BudgetExhausted)


def test_a_fresh_record_of_a_refused_init_ledger_cannot_be_spent_by_python(tmp_path, digits):
    Xte = digits[1]
    _, model = _model(tmp_path, digits)
    assert privpred.load(model, init_ledger=True).predict(Xte[:3]).shape == (3,)
    other = tmp_path / "other.sqlite"
    c, n, err = _predict(model, tmp_path, Xte[3:5], "--ledger", f"sqlite:{other}", "--init-ledger")
    assert (c, n) == (2, 0), err
    e = _python(model, Xte[3:5], ledger=other)
    assert isinstance(e, RuntimeError) and "already released" in str(e), e
    e = _python(model, Xte[3:5], ledger=f"sqlite:{other}", init_ledger=True)
    assert isinstance(e, RuntimeError), e
    # the default ledger still holds the one budget: 2 left
    assert _python(model, Xte[3:5]) == 2
    assert isinstance(_python(model, Xte[5:6]), privpred.BudgetExhausted)


def test_a_seeded_private_prediction_model_refuses_to_answer_as_a_release(tmp_path, digits):
    Xtr, Xte, ytr, _ = digits
    kw = dict(classes="observed", method="prediction-sensitivity", epsilon=5.0, budget=B, lam=1e-3)
    seeded = privpred.PrivateLogisticRegression(unit_ball="normalize", random_state=11, **kw).fit(Xtr, ytr)
    with pytest.raises(RuntimeError, match="seed 11"):
        seeded.predict(Xte[:1])
    # opted in, the answers are an experiment's and the model says so
    opted = privpred.PrivateLogisticRegression(unit_ball="normalize", random_state=11, allow_seeded=True, **kw).fit(Xtr, ytr)
    assert opted.predict(Xte[:2]).shape == (2,)
    assert json.loads(opted._native.info_json())["experiment_seed"] == 11
    # saved, the file is refused by predict and by load alike
    seeded.save(tmp_path / "s.safetensors")
    c, _, err = _predict(tmp_path / "s.safetensors", tmp_path, Xte[:1], "--init-ledger")
    assert c == 2 and "seed" in err, err
    with pytest.raises(ValueError, match="seed 11"):
        privpred.load(tmp_path / "s.safetensors", init_ledger=True)
    back = privpred.load(tmp_path / "s.safetensors", init_ledger=True, allow_seeded=True)
    assert back.predict(Xte[:1]).shape == (1,)
    assert json.loads(back._native.info_json())["experiment_seed"] == 11


def test_save_load_round_trips_and_pickles_never_reset_or_double_a_budget(tmp_path, digits):
    Xte = digits[1]
    est, model = _model(tmp_path, digits)
    first = privpred.load(model, init_ledger=True)
    assert first.predict(Xte[:2]).shape == (2,)
    # loaded again: the same record, not a fresh budget
    again = privpred.load(model)
    assert again.budget_left_ == B - 2
    # saved to the same file: the same budget; to another file: refused (a second budget)
    again.save(model)
    with pytest.raises(RuntimeError, match="second budget"):
        again.save(tmp_path / "copy.safetensors")
    with pytest.raises(RuntimeError, match="second budget"):
        est.save(tmp_path / "copy2.safetensors")
    assert not (tmp_path / "copy.safetensors").exists()
    # a pickle of a budgeted model is refused (it would carry a fresh budget)
    with pytest.raises(TypeError):
        pickle.dumps(again)
    assert privpred.load(model).predict(Xte[2:5]).shape == (3,)
    assert isinstance(_python(model, Xte[5:6]), privpred.BudgetExhausted)
    c, _, err = _predict(model, tmp_path, Xte[5:6])
    assert c == 2 and "budget exhausted" in err, err
    recs = _records(model)
    assert len(recs) == 1 and recs[0]["spent"] == B, recs
