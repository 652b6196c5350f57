"""The durable budget ledger from Python: the same SQLite file `privpred serve --ledger`
uses, shared by estimators, processes, restarted processes and the server."""

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
    return privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", 
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
    with pytest.raises(RuntimeError, match="ledger") as e:
        privpred.load(model, ledger=ledger)
    assert not ledger.exists()
    # the message names the Python parameter, not the command-line flag
    assert "init_ledger=True" in str(e.value) and "--" not in str(e.value), str(e.value)
    # init creates it once; a second init is refused (a budget is never reset)
    privpred.load(model, ledger=ledger, init_ledger=True)
    with pytest.raises(RuntimeError, match="ledger"):
        privpred.load(model, ledger=ledger, init_ledger=True)
    # without a ledger, init_ledger creates the record in the CLI's default ledger beside the file
    privpred.load(model, init_ledger=True)
    assert (tmp_path / "m.safetensors.ledger.sqlite").is_file()
    # a model whose answers cost nothing has no use for a ledger
    Xtr, _, ytr, _ = digits
    ms = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", method="model-sensitivity", epsilon=1.0).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="private-prediction"):
        ms.save(tmp_path / "ms.safetensors", ledger=tmp_path / "other.sqlite")
    with pytest.raises(ValueError, match="SQLite"):
        est.save(tmp_path / "m2.safetensors", ledger="postgres://u@localhost/db")


@pytest.mark.parametrize("fit_intercept, bias, value", [
    (False, None, 0.0), (True, 0.05, 0.05), (True, 0.5, 0.5), (True, True, 0.7071067811865476),
    (False, False, 0.0), (True, None, 0.05),
])
def test_bias_value_is_applied_and_recorded(tmp_path, digits, fit_intercept, bias, value):
    Xtr, Xte, ytr, yte = digits
    est = privpred.PrivateLogisticRegression(
        unit_ball="normalize",
        method="non-private", fit_intercept=fit_intercept, bias=bias).fit(Xtr, ytr)
    info = json.loads(est._native.info_json())
    # one more feature exactly when a bias feature is appended
    assert info["features"] == Xtr.shape[1] + (1 if value else 0), info
    assert est.score(Xte, yte) > 0.8
    # the saved artifact records the value as the CLI does (its preprocessing recipe)
    est.save(tmp_path / "m.safetensors")
    again = privpred.load(tmp_path / "m.safetensors")
    assert np.array_equal(again.predict(Xte), est.predict(Xte))
    assert again.fit_intercept == fit_intercept
    if value:
        assert again.bias == pytest.approx(value)


@pytest.mark.parametrize("bias", [-0.1, 0.0, 1.0, 1.5, float("nan"), "0.1"])
def test_bad_bias_values_are_refused_naming_the_range(digits, bias):
    Xtr, _, ytr, _ = digits
    with pytest.raises(ValueError, match=r"\(0(\.0)?, 1(\.0)?\)"):
        privpred.PrivateLogisticRegression(unit_ball="normalize", method="non-private", bias=bias).fit(Xtr, ytr)


def _answer_sequence(predict, left, Xte):
    """The same queries against one answering path: (answers, budget left) after each."""
    rows = [
        Xte[:4],                                   # 4 new rows
        Xte[:4],                                   # asked before: free, the same answers
        np.vstack([Xte[:2], Xte[4:6], Xte[4:5]]),  # 2 new; a row twice in one request: 1 unit
        2.0 * Xte[6:7],                            # new
        Xte[6:7],                                  # the same row after preprocessing (x/||x||): free
        Xte[7:12],                                 # 5 new > 3 left: refused whole
        Xte[7:10],                                 # 3 new: the budget of 10 is spent
        Xte[:10],                                  # all asked before: answered, free
        Xte[12:13],                                # new: refused
    ]
    out = []
    for X in rows:
        try:
            out.append((predict(X).tolist(), left()))
        except privpred.BudgetExhausted:
            out.append(("refused", left()))
    return out


def test_one_answer_rule_in_memory_in_a_durable_ledger_and_in_the_server(tmp_path, digits):
    """A repeated row is answered the same way everywhere: the stored answer, free."""
    Xtr, Xte, ytr, yte = digits
    kw = dict(method="subsample-aggregate", epsilon=50.0, budget=10, teachers=8)
    memory = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", **kw).fit(Xtr, ytr)
    seq = _answer_sequence(memory.predict, lambda: memory.budget_left_, Xte)
    lefts = [left for _, left in seq]
    assert lefts == [6, 6, 4, 3, 3, 3, 0, 0, 0]
    assert [a for a, _ in seq].count("refused") == 2
    (a0, _), (a1, _), (a2, _), (a3, _), (a4, _) = seq[:5]
    assert a1 == a0 and a2[:2] == a0[:2] and a2[2] == a2[4] and a4 == a3
    assert seq[7][0][:4] == a0

    durable = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", **kw).fit(Xtr, ytr)
    durable.save(tmp_path / "d.safetensors", ledger=tmp_path / "d.sqlite")
    dseq = _answer_sequence(durable.predict, lambda: durable.budget_left_, Xte)
    assert [left for _, left in dseq] == lefts
    assert [a == "refused" for a, _ in dseq] == [a == "refused" for a, _ in seq]

    served = privpred.PrivateLogisticRegression(unit_ball="normalize", classes="observed", **kw).fit(Xtr, ytr)
    (tmp_path / "srv").mkdir()
    served.save(tmp_path / "srv" / "s.safetensors")
    server = Server(tmp_path / "srv" / "s.safetensors", tmp_path / "srv")
    try:
        c = privpred.Client(server.url, classes=served.classes_)
        state = {}

        def ask(X):
            labels, state["left"] = c.predict(X)
            return labels

        def left():
            return state.get("left")

        sseq = _answer_sequence(ask, left, Xte)
    finally:
        server.close()
    # the server reports the budget with each answer; a refused request keeps the last value
    assert [left for _, left in sseq] == lefts
    assert [a == "refused" for a, _ in sseq] == [a == "refused" for a, _ in seq]
