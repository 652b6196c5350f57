"""privpred vs diffprivlib vs scikit-learn on the breast-cancer and wine tables.

Both tables come from scikit-learn (the same files `privpred data fetch` installs). One
stratified 80/20 split (seed 0) is written as two CSV files and used by every library.

- privpred: `privpred compare --dataset csv:TRAIN,TEST --schema examples/NAME.schema.json
  --epsilon 0.1,1,10 --budget B --repetitions R --teachers 16 --json` (every method; lambda / nu
  cross-validated on a 10 % hold-out of the training split, privacy cost of that selection
  ignored, as in the paper), once with delta = 0 and once with delta = 1e-5 for DP-SGD.
- diffprivlib: the same rows mapped by the same schema (public bounds; every row has norm
  <= 1), `LogisticRegression(epsilon, data_norm=1, C=1/(lambda n))` with lambda chosen on the
  same kind of 10 % hold-out from privpred's grid, and `GaussianNB(epsilon, bounds=schema
  bounds)` on the raw features; R fresh fits each.
- scikit-learn: non-private `LogisticRegression` on the schema-mapped rows (lambda chosen on
  the same kind of hold-out) and, default C = 1, with per-feature min-max scaling (a
  statistic of the data, for reference).

diffprivlib 0.6.6 does not import with scikit-learn >= 1.7; run this script in an environment
with scikit-learn 1.5.2 for diffprivlib (the non-private reference numbers were checked
against scikit-learn 1.9.1 as well).

    python python/benchmarks/tables_vs_diffprivlib.py --privpred target/release/privpred \
        [--repetitions 10] [--budget 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

LAMBDA_GRID = [1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1]
EPSILONS = [0.1, 1.0, 10.0]
# subsample-and-aggregate's teachers: 16 (the default 256 is for MNIST's 60,000 rows; these
# tables have 142 and 455 training rows)
TEACHERS = 16
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def schema_map(X, schema):
    """The schema's map into the unit ball: (2x - lo - hi)/(hi - lo), clipped, times 1/sqrt(m)."""
    cols = [c for c in schema["columns"] if c["type"] == "numeric"]
    lo = np.array([c["min"] for c in cols], dtype=float)
    hi = np.array([c["max"] for c in cols], dtype=float)
    Xc = np.clip(X, lo, hi)
    return (2 * Xc - lo - hi) / (hi - lo) / np.sqrt(len(cols)), lo, hi


def privpred_runs(binary, train, test, schema_path, reps, budget, delta):
    out = subprocess.run(
        [binary, "compare", "--dataset", f"csv:{train},{test}", "--schema", schema_path,
         "--epsilon", ",".join(str(e) for e in EPSILONS), "--budget", str(budget),
         "--delta", str(delta), "--repetitions", str(reps), "--teachers", str(TEACHERS), "--json"],
        check=True, capture_output=True, text=True,
    )
    j = json.loads(out.stdout)
    rows = {}
    for cell in j["grid"]["cells"]:
        eps = cell["setting"]["epsilon"]
        for r in cell["results"]:
            rows[(r["method"], eps)] = (r["mean"], r["std"])
    return rows, j["nonprivate_accuracy"]


def dpl_logreg(Xtr, ytr, Xte, yte, eps, reps, seed):
    from diffprivlib.models import LogisticRegression as DPLR

    Xa, Xh, ya, yh = train_test_split(Xtr, ytr, test_size=0.1, random_state=seed, stratify=ytr)
    best = max(
        LAMBDA_GRID,
        key=lambda lam: DPLR(epsilon=eps, data_norm=1.0, C=1.0 / (lam * len(Xa)),
                             random_state=seed).fit(Xa, ya).score(Xh, yh),
    )
    accs = [DPLR(epsilon=eps, data_norm=1.0, C=1.0 / (best * len(Xtr)), random_state=seed + 1 + r)
            .fit(Xtr, ytr).score(Xte, yte) for r in range(reps)]
    return float(np.mean(accs)), float(np.std(accs, ddof=1)), best


def sk_logreg(Xtr, ytr, Xte, yte, seed=0):
    """Non-private scikit-learn, lambda chosen on the same kind of 10 % hold-out."""
    Xa, Xh, ya, yh = train_test_split(Xtr, ytr, test_size=0.1, random_state=seed, stratify=ytr)
    best = max(LAMBDA_GRID, key=lambda lam: LogisticRegression(C=1.0 / (lam * len(Xa)), max_iter=10000)
               .fit(Xa, ya).score(Xh, yh))
    return LogisticRegression(C=1.0 / (best * len(Xtr)), max_iter=10000).fit(Xtr, ytr).score(Xte, yte)


def dpl_nb(Xtr, ytr, Xte, yte, lo, hi, eps, reps, seed):
    from diffprivlib.models import GaussianNB

    accs = [GaussianNB(epsilon=eps, bounds=(lo, hi), random_state=seed + r)
            .fit(np.clip(Xtr, lo, hi), ytr).score(np.clip(Xte, lo, hi), yte) for r in range(reps)]
    return float(np.mean(accs)), float(np.std(accs, ddof=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--privpred", default=os.path.join(ROOT, "target", "release", "privpred"))
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--json")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    results = {}
    for name, loader in [("breast-cancer", load_breast_cancer), ("wine", load_wine)]:
        X, y = loader(return_X_y=True)
        schema_path = os.path.join(ROOT, "examples", f"{name}.schema.json")
        schema = json.load(open(schema_path))
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for part, (Xp, yp) in [("train", (Xtr, ytr)), ("test", (Xte, yte))]:
                p = os.path.join(d, f"{part}.csv")
                np.savetxt(p, np.column_stack([Xp, yp]), delimiter=",", fmt="%.10g")
                paths.append(p)
            pp, nonpriv = privpred_runs(a.privpred, *paths, schema_path, a.repetitions, a.budget, 0.0)
            try:
                pp_d, _ = privpred_runs(a.privpred, *paths, schema_path, a.repetitions, a.budget, 1e-5)
                pp.update({k: v for k, v in pp_d.items() if k[0] == "dp-sgd"})
            except subprocess.CalledProcessError as e:
                print(f"{name}: DP-SGD (delta = 1e-5) not run: {e.stderr.strip()}")
        Mtr, lo, hi = schema_map(Xtr, schema)
        Mte, _, _ = schema_map(Xte, schema)
        sk = sk_logreg(Mtr, ytr, Mte, yte)
        mn, mx = Xtr.min(0), Xtr.max(0)
        sk_mm = LogisticRegression(max_iter=10000).fit((Xtr - mn) / (mx - mn), ytr).score(
            (np.clip(Xte, mn, mx) - mn) / (mx - mn), yte)
        res = {"n_train": len(ytr), "n_test": len(yte), "privpred_nonprivate": nonpriv,
               "sklearn_schema": sk, "sklearn_minmax": sk_mm, "rows": []}
        for eps in EPSILONS:
            for m in ["model-sensitivity", "loss-perturbation", "prediction-sensitivity",
                      "subsample-aggregate", "dp-sgd"]:
                if (m, eps) in pp:
                    mean, std = pp[(m, eps)]
                    res["rows"].append({"library": "privpred", "method": m, "epsilon": eps,
                                        "mean": mean, "std": std})
            mean, std, lam = dpl_logreg(Mtr, ytr, Mte, yte, eps, a.repetitions, 0)
            res["rows"].append({"library": "diffprivlib", "method": "LogisticRegression",
                                "epsilon": eps, "mean": mean, "std": std, "lambda": lam})
            mean, std = dpl_nb(Xtr, ytr, Xte, yte, lo, hi, eps, a.repetitions, 0)
            res["rows"].append({"library": "diffprivlib", "method": "GaussianNB",
                                "epsilon": eps, "mean": mean, "std": std})
        results[name] = res
        print(f"\n## {name} (train {len(ytr)}, test {len(yte)})")
        print(f"non-private: privpred {nonpriv:.4f}, scikit-learn (schema map) {sk:.4f}, "
              f"scikit-learn (min-max of the data) {sk_mm:.4f}")
        print("| library | method | ε = 0.1 | ε = 1 | ε = 10 |")
        print("|---|---|---|---|---|")
        keys = sorted({(r["library"], r["method"]) for r in res["rows"]},
                      key=lambda k: (k[0] != "privpred", k[1]))
        for lib, m in keys:
            cells = []
            for eps in EPSILONS:
                r = [x for x in res["rows"] if (x["library"], x["method"], x["epsilon"]) == (lib, m, eps)]
                cells.append(f"{100 * r[0]['mean']:.1f} ± {100 * r[0]['std']:.1f}" if r else "–")
            print(f"| {lib} | {m} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
