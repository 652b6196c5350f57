"""The measurement behind ``fit_intercept``'s default: hold-out accuracy with and without the
intercept (a bias feature of value 0.05) for the private-training methods.

Measured on a 10 % hold-out of each training set (never the test set), ``--repetitions``
fresh private fits per cell: digits (scikit-learn's, with ``lam="cv"``, the estimator's
default) and MNIST (fixed lambda per epsilon, the values the diffprivlib comparison chose, so
each fit is one training run).

    python benchmarks/fit_intercept.py [--repetitions 10] [--json out.json] [--skip-mnist]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

import privpred


def holdout(X, y, frac=0.1, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(X))
    k = int(len(X) * frac)
    return X[idx[k:]], y[idx[k:]], X[idx[:k]], y[idx[:k]]


def cell(X, y, Xho, yho, reps, **kw):
    out = {}
    for fi in (True, False):
        accs, secs = [], []
        for _ in range(reps):
            t = time.perf_counter()
            m = privpred.PrivateLogisticRegression(fit_intercept=fi, unit_ball="normalize", **kw).fit(X, y)
            secs.append(time.perf_counter() - t)
            accs.append(float(m.score(Xho, yho)))
        out[str(fi)] = {"acc_mean": float(np.mean(accs)), "acc_std": float(np.std(accs)),
                        "sec_mean": float(np.mean(secs)), "accs": accs}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--skip-mnist", action="store_true")
    a = ap.parse_args()
    warnings.simplefilter("ignore", privpred.PrivacyLeakWarning)
    rows = []
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    data = {"digits": (holdout(X.astype(np.float32), y), {})}
    if not a.skip_mnist:
        Xtr, ytr, _, _, _ = privpred.datasets.load("mnist")
        data["mnist"] = (holdout(Xtr, ytr), {1.0: {"model-sensitivity": 0.5, "loss-perturbation": 0.1},
                                              10.0: {"model-sensitivity": 1e-3, "loss-perturbation": 1e-3}})
    for name, ((X, y, Xho, yho), lams) in data.items():
        for eps in (1.0, 10.0):
            methods = ["model-sensitivity", "loss-perturbation"] + (["dp-sgd"] if name == "digits" else [])
            for method in methods:
                kw = {"method": method, "epsilon": eps}
                if method == "dp-sgd":
                    kw.update(delta=1e-5, clip=0.5, epochs=5)
                elif lams:
                    kw["lam"] = lams[eps][method]
                r = cell(X, y, Xho, yho, a.repetitions, **kw)
                row = {"dataset": name, "epsilon": eps, "method": method, **r}
                rows.append(row)
                print(f"{name} eps={eps:g} {method}: intercept {r['True']['acc_mean']:.4f} ± "
                      f"{r['True']['acc_std']:.4f}, none {r['False']['acc_mean']:.4f} ± "
                      f"{r['False']['acc_std']:.4f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"repetitions": a.repetitions, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
