"""The durable budget ledger from Python: the same SQLite file `privpred serve --ledger`
uses, shared by estimators, processes, restarted sessions and the server (issue 18)."""

from __future__ import annotations

import subprocess
import sys
import json
import textwrap

import numpy as np
import pytest

import privpred
from test_client import Server


def _fit(digits, budget=12):
    Xtr, Xte, ytr, yte = digits
    return privpred.PrivateLogisticRegression(
        method="subsample-aggregate", epsilon=50.0, budget=budget, teachers=8
    ).fit(Xtr, ytr)


def test_save_with_a_ledger_records_every_answer_durably(tmp_path, digits):
    Xte = digits[1]
    est = _fit(digits)
    model, ledger = tmp_path / "m.safetensors", tmp_path / "ledger.sqlite"
    est.save(model, ledger=ledger)
    assert est.budget_left_ == 12
    est.predict(Xte[:5])
    assert est.budget_left_ == 7
    # a restarted session: the loaded model sees what was spent
    again = privpred.load(model, ledger=ledger)
    assert again.budget_left_ == 7
    with pytest.raises(privpred.BudgetExhausted, match="only 7 remain"):
        again.predict(Xte[10:18])  # 8 new rows > 7: refused whole, nothing spent
    assert again.budget_left_ == 7
    # a repeated row is the stored earlier answer and costs nothing (the server's answer store)
    first = again.predict(Xte[:5])
    assert again.budget_left_ == 7 and np.array_equal(first, est.predict(Xte[:5]))
    again.predict(Xte[20:27])
    assert again.budget_left_ == 0 and est.budget_left_ == 0
    with pytest.raises(privpred.BudgetExhausted, match="exhausted"):
        est.predict(Xte[30:31])


def test_two_processes_sharing_a_ledger_never_exceed_the_budget(tmp_path, digits):
    Xte = digits[1]
    est = _fit(digits, budget=40)
    model, ledger = tmp_path / "m.safetensors", tmp_path / "ledger.sqlite"
    est.save(model, ledger=ledger)
    np.save(tmp_path / "x.npy", Xte[:60])
    script = textwrap.dedent(f"""
        import sys, numpy as np, privpred
        m = privpred.load({str(model)!r}, ledger={str(ledger)!r})
        X = np.load({str(tmp_path / 'x.npy')!r})
        start = int(sys.argv[1]); answered = 0
        for i in range(start, start + 30):
            try:
                m.predict(X[i:i + 1]); answered += 1
            except privpred.BudgetExhausted:
                pass
        print(answered)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(s)], stdout=subprocess.PIPE, text=True)
             for s in (0, 30)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    answered = sum(int(o.strip()) for o in outs)
    assert answered == 40, outs  # 60 distinct rows asked, exactly B = 40 answered
    assert privpred.load(model, ledger=ledger).budget_left_ == 0


def test_a_ledger_is_shared_with_privpred_serve_both_ways(tmp_path, digits):
    Xte = digits[1]
    est = _fit(digits, budget=20)
    model, ledger = tmp_path / "model.safetensors", tmp_path / "ledger.sqlite"
    est.save(model, ledger=ledger)  # Python creates the record
    est.predict(Xte[:6])
    # the server opens the same file without --init-ledger and sees 14 left
    import subprocess as sp
    from conftest import cli_path

    err = open(tmp_path / "serve.stderr", "w")
    proc = sp.Popen([str(cli_path()), "serve", "--model", str(model), "--listen", "127.0.0.1:0",
                     "--ledger", f"sqlite:{ledger}"], stdout=sp.PIPE, stderr=err, stdin=sp.DEVNULL, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on "), (tmp_path / "serve.stderr").read_text()
        c = privpred.Client(line.removeprefix("listening on "))
        labels, left = c.predict(Xte[10:14])
        assert left == 10
        # and Python sees the server's spending
        assert est.budget_left_ == 10
        with pytest.raises(privpred.BudgetExhausted):
            c.predict(Xte[20:31])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        err.close()
    assert privpred.load(model, ledger=ledger).budget_left_ == 10


def test_a_record_created_by_privpred_serve_is_used_by_python(tmp_path, digits):
    Xte = digits[1]
    est = _fit(digits, budget=9)
    model = tmp_path / "model.safetensors"
    est.save(model)
    s = Server(model, tmp_path)  # --init-ledger on tmp_path/ledger.sqlite
    try:
        privpred.Client(s.url).predict(Xte[:4])
    finally:
        s.close()
    m = privpred.load(model, ledger=tmp_path / "ledger.sqlite")
    assert m.budget_left_ == 5
    m.predict(Xte[4:9])
    with pytest.raises(privpred.BudgetExhausted):
        m.predict(Xte[9:10])


def test_ledger_misuse_is_refused_with_clear_errors(tmp_path, digits):
    est = _fit(digits)
    model, ledger = tmp_path / "m.safetensors", tmp_path / "ledger.sqlite"
    # no ledger file and no init: refused, nothing created
    est.save(model)
    with pytest.raises(RuntimeError, match="ledger"):
        privpred.load(model, ledger=ledger)
    assert not ledger.exists()
    # init creates it once; a second init is refused (a budget is never reset)
    privpred.load(model, ledger=ledger, init_ledger=True)
    with pytest.raises(RuntimeError, match="ledger"):
        privpred.load(model, ledger=ledger, init_ledger=True)
    with pytest.raises(ValueError, match="init_ledger"):
        privpred.load(model, init_ledger=True)
    # a model whose answers cost nothing has no use for a ledger
    Xtr, _, ytr, _ = digits
    ms = privpred.PrivateLogisticRegression(method="model-sensitivity", epsilon=1.0).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="private-prediction"):
        ms.save(tmp_path / "ms.safetensors", ledger=tmp_path / "other.sqlite")
    with pytest.raises(ValueError, match="SQLite"):
        est.save(tmp_path / "m2.safetensors", ledger="postgres://u@localhost/db")


@pytest.mark.parametrize("bias, value", [(0, 0.0), (0.05, 0.05), (0.5, 0.5), (True, 0.7071067811865476), (False, 0.0), (None, 0.0)])
def test_bias_value_is_applied_and_recorded(tmp_path, digits, bias, value):
    Xtr, Xte, ytr, yte = digits
    est = privpred.PrivateLogisticRegression(method="non-private", bias=bias).fit(Xtr, ytr)
    info = json.loads(est._native.info_json())
    # one more feature exactly when a bias feature is appended
    assert info["features"] == Xtr.shape[1] + (1 if value else 0), info
    assert est.score(Xte, yte) > 0.8
    # the saved artifact records the value as the CLI does (its preprocessing recipe)
    est.save(tmp_path / "m.safetensors")
    again = privpred.load(tmp_path / "m.safetensors")
    assert np.array_equal(again.predict(Xte), est.predict(Xte))


@pytest.mark.parametrize("bias", [-0.1, 1.0, 1.5, float("nan"), "0.1"])
def test_bad_bias_values_are_refused_naming_the_range(digits, bias):
    Xtr, _, ytr, _ = digits
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        privpred.PrivateLogisticRegression(method="non-private", bias=bias).fit(Xtr, ytr)
