"""privpred vs diffprivlib: private logistic regression at delta = 0, on MNIST (10 classes)
or scikit-learn's breast cancer data (2 classes, ``--dataset breast-cancer``: a stratified
70/30 split with seed 0).

For each epsilon in {0.1, 1, 10}: each library's regularisation is chosen on a 10 % hold-out
of the training set (one private fit per grid value, scored on the hold-out; the selection's
privacy cost is ignored for both, as in the paper), then `--repetitions` fresh fits at the
chosen value are timed and scored on the 10,000 test images.

Both libraries get the same rows: raw pixels mapped into the unit ball by x / ||x||
(privpred's `normalize` rule, which it applies itself; diffprivlib gets the normalised rows
with data_norm = 1, a data-independent bound). The lambda grid is privpred's (docs/study.md);
diffprivlib's C is mapped from it by its own definition, l2 strength = 1 / (C n).

    python benchmarks/vs_diffprivlib.py [--dataset mnist] [--repetitions 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

import privpred

LAMBDA_GRID = [1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1]


def unit(X):
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(n > 0, n, 1.0)


def ours(method, eps, lam, classes):
    # the rows are already x/||x|| (the estimator's normalize rule leaves them unchanged);
    # the labels are the task's declared ones (public)
    return privpred.PrivateLogisticRegression(method=method, epsilon=eps, lam=lam,
                                              unit_ball="normalize",  # x/||x||, as diffprivlib
                                              classes=classes)


def load(name):
    if name == "mnist":
        return privpred.datasets.load("mnist")
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    return Xtr, ytr, Xte, yte, {"name": "breast-cancer", "source": "sklearn.datasets.load_breast_cancer",
                                "split": "train_test_split(test_size=0.3, random_state=0, stratify=y)"}


def dpl(eps, lam, n):
    from diffprivlib.models import LogisticRegression

    return LogisticRegression(epsilon=eps, data_norm=1.0, C=1.0 / (lam * n))


def run(make, grid, Xtr, ytr, Xho, yho, Xfull, yfull, Xte, yte, reps):
    scores = []
    for lam in grid:
        t = time.perf_counter()
        scores.append(make(lam, len(Xtr)).fit(Xtr, ytr).score(Xho, yho))
        print(f"  lambda={lam:g}: hold-out {scores[-1]:.4f} ({time.perf_counter() - t:.1f} s)", flush=True)
    best = grid[int(np.argmax(scores))]
    accs, secs = [], []
    for _ in range(reps):
        t = time.perf_counter()
        m = make(best, len(Xfull)).fit(Xfull, yfull)
        secs.append(time.perf_counter() - t)
        accs.append(m.score(Xte, yte))
    return {"lambda": best, "holdout": scores, "acc_mean": float(np.mean(accs)),
            "acc_std": float(np.std(accs)), "sec_mean": float(np.mean(secs)), "accs": accs, "secs": secs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--methods", nargs="+", default=["loss-perturbation", "model-sensitivity", "diffprivlib"])
    ap.add_argument("--grid", type=float, nargs="+", default=LAMBDA_GRID,
                    help="lambda grid (default: privpred's ten values)")
    ap.add_argument("--dataset", choices=["mnist", "breast-cancer"], default="mnist")
    ap.add_argument("--json")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    Xtr, ytr, Xte, yte, prov = load(a.dataset)
    Xtr, Xte = unit(Xtr.astype(np.float64)), unit(Xte.astype(np.float64))
    rng = np.random.default_rng(0)
    p = rng.permutation(len(Xtr))
    k = len(Xtr) // 10
    ho, tr = p[:k], p[k:]
    classes = list(range(10)) if a.dataset == "mnist" else [0, 1]
    rows = []
    for eps in a.epsilons:
        for method in a.methods:
            if method == "diffprivlib":
                make = lambda lam, n, e=eps: dpl(e, lam, n)  # noqa: E731
            else:
                make = lambda lam, n, e=eps, m=method: ours(m, e, lam, classes)  # noqa: E731
            r = run(make, a.grid, Xtr[tr], ytr[tr], Xtr[ho], ytr[ho], Xtr, ytr, Xte, yte, a.repetitions)
            r.update(epsilon=eps, method=method)
            rows.append(r)
            print(f"eps={eps:<5} {method:<20} acc {100 * r['acc_mean']:.2f} ± {100 * r['acc_std']:.2f} %  "
                  f"{r['sec_mean']:.2f} s/fit  lambda={r['lambda']:g}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"dataset": prov, "repetitions": a.repetitions, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
