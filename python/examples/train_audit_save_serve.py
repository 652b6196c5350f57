"""Train a private model in Python, audit its mechanism, save it, and serve it.

    python examples/train_audit_save_serve.py [--privpred target/release/privpred]

1. trains subsample-and-aggregate (private prediction, budget B = 50 answers) on
   scikit-learn's digits and reads its guarantee;
2. audits the mechanism empirically with `privpred audit` (a statistical lower bound on
   epsilon, which must stay below the claimed epsilon);
3. saves the model as a safetensors artifact and serves it with `privpred serve` and a
   durable SQLite budget ledger;
4. queries it with privpred.Client until the budget is spent (HTTP 429 ->
   privpred.BudgetExhausted).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import privpred


def main():
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parents[2]
    ap.add_argument("--privpred", default=str(here / "target" / "release" / "privpred"))
    a = ap.parse_args()

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    est = privpred.PrivateLogisticRegression(
        unit_ball="normalize",
        method="subsample-aggregate", epsilon=10.0, budget=50, teachers=32, classes=range(10)
    ).fit(Xtr, ytr)
    print("guarantee:", json.dumps(est.guarantee_, indent=1))

    audit = subprocess.run(
        [a.privpred, "audit", "subsample-aggregate", "--epsilon", "10", "--budget", "50",
         "--trials", "2000", "--json"],
        capture_output=True, text=True, check=True,
    )
    print("audit:", audit.stdout.strip()[:600])

    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "digits.safetensors"
        est.save(model)
        server = subprocess.Popen(
            [a.privpred, "serve", "--model", str(model), "--listen", "127.0.0.1:0",
             "--ledger", f"sqlite:{Path(d) / 'ledger.sqlite'}", "--init-ledger"],
            stdout=subprocess.PIPE, text=True,
        )
        try:
            url = server.stdout.readline().strip().removeprefix("listening on ")
            client = privpred.Client(url)
            labels, left = client.predict(Xte[:40])
            print(f"40 answers, accuracy {(est.classes_[labels] == yte[:40]).mean():.2f}, {left} left")
            try:
                client.predict(Xte[40:60])
            except privpred.BudgetExhausted as e:
                print("refused:", e)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
