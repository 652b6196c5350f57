"""Two-class problems: privpred's sigmoid model vs its two-class softmax vs diffprivlib.

For each dataset and each epsilon in {0.1, 1, 10} (delta = 0, replace-one neighbours for
privpred; diffprivlib's LogisticRegression is its objective-perturbation mechanism, pure
epsilon-DP), each model's regularisation is chosen on a 10 % hold-out of the training set
(one private fit per grid value, scored on the hold-out; the selection's privacy cost is
ignored for all three, as in the paper), then `--repetitions` fresh fits at the chosen value
are timed and scored on the test set.

Models:
  softmax-2   privpred model sensitivity, binary=False (two output columns, K = sqrt(2))
  sigmoid     privpred model sensitivity, binary=True  (one output column, K = 1)
  diffprivlib diffprivlib.models.LogisticRegression, C = 1 / (lambda n), fit_intercept=False
  lp-softmax-2  privpred loss perturbation, binary=False (rho = 2/eps, b in R^(2D))
  lp-sigmoid    privpred loss perturbation, binary=True  (rho = 1/(2 eps), b in R^D)

Data, the same rows for all three:
  breast-cancer  scikit-learn's load_breast_cancer (569 x 30), a stratified 75/25 split
                 (random_state 0). Each feature is divided by a public bound, the next power
                 of ten above the feature's largest value (e.g. 2501 -> 1e4), then every row
                 is mapped into the unit ball by x / ||x|| (privpred's `normalize` rule; no
                 statistic of the data beyond those rounded bounds is used).
  mnist-0-4      MNIST digits 0-4 (label 0) vs 5-9 (label 1), 60,000 / 10,000, raw pixels
                 (public bound 255) mapped by x / ||x||.
diffprivlib gets the normalised rows with data_norm = 1 (a data-independent bound); no model
gets an intercept. diffprivlib 0.6.6 does not import under scikit-learn 1.9: two shims are
applied before importing it (scikit-learn 1.9 dropped `sklearn.tree._tree.DOUBLE/DTYPE`,
which diffprivlib's forest module imports, and LogisticRegression's `multi_class` argument,
which diffprivlib's constructor passes on); neither touches its logistic regression's
mechanism.

    python benchmarks/binary_vs_diffprivlib.py [--repetitions 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings

import numpy as np

import privpred

LAMBDA_GRID = [1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1]


def diffprivlib_shims():
    """Lets diffprivlib 0.6.6 import and construct under scikit-learn 1.9 (see above)."""
    import sklearn.linear_model as lm
    import sklearn.tree._tree as tree

    for name, value in (("DOUBLE", np.float64), ("DTYPE", np.float32)):
        if not hasattr(tree, name):
            setattr(tree, name, value)
    init = lm.LogisticRegression.__init__
    if getattr(init, "_privpred_shim", False):
        return

    def patched(self, *a, multi_class=None, **k):
        init(self, *a, **k)
        self.multi_class = multi_class

    patched._privpred_shim = True
    lm.LogisticRegression.__init__ = patched


def unit(X):
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(n > 0, n, 1.0)


def breast_cancer():
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    bounds = 10.0 ** np.ceil(np.log10(X.max(axis=0)))
    X = unit(X / bounds)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    return Xtr, ytr, Xte, yte


def mnist_0_4():
    Xtr, ytr, Xte, yte, _ = privpred.datasets.load("mnist")
    Xtr, Xte = unit(Xtr.astype(np.float64)), unit(Xte.astype(np.float64))
    return Xtr, (ytr >= 5).astype(int), Xte, (yte >= 5).astype(int)


def make(model, eps, lam, n):
    if model == "diffprivlib":
        from diffprivlib.models import LogisticRegression

        return LogisticRegression(epsilon=eps, data_norm=1.0, C=1.0 / (lam * n), fit_intercept=False)
    method = "loss-perturbation" if model.startswith("lp-") else "model-sensitivity"
    return privpred.PrivateLogisticRegression(
        method=method, epsilon=eps, lam=lam, binary=model.endswith("sigmoid"),
        unit_ball="normalize",  # x/||x||, as for diffprivlib
        classes=[0, 1],  # public: both tasks have two declared labels
    )


def run(model, eps, grid, Xtr, ytr, ho, tr, Xte, yte, reps):
    scores = []
    for lam in grid:
        m = make(model, eps, lam, len(tr)).fit(Xtr[tr], ytr[tr])
        scores.append(m.score(Xtr[ho], ytr[ho]))
    best = grid[int(np.argmax(scores))]
    accs, secs = [], []
    for _ in range(reps):
        t = time.perf_counter()
        m = make(model, eps, best, len(Xtr)).fit(Xtr, ytr)
        secs.append(time.perf_counter() - t)
        accs.append(m.score(Xte, yte))
    return {"lambda": best, "holdout": scores, "acc_mean": float(np.mean(accs)),
            "acc_std": float(np.std(accs)), "sec_mean": float(np.mean(secs)),
            "accs": accs, "secs": secs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--datasets", nargs="+", default=["breast-cancer", "mnist-0-4"])
    ap.add_argument("--models", nargs="+", default=["softmax-2", "sigmoid", "diffprivlib", "lp-softmax-2", "lp-sigmoid"])
    ap.add_argument("--json")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    diffprivlib_shims()
    import diffprivlib
    import sklearn

    rows = []
    t0 = time.perf_counter()
    for name in a.datasets:
        Xtr, ytr, Xte, yte = breast_cancer() if name == "breast-cancer" else mnist_0_4()
        rng = np.random.default_rng(0)
        p = rng.permutation(len(Xtr))
        k = len(Xtr) // 10
        ho, tr = p[:k], p[k:]
        for eps in a.epsilons:
            for model in a.models:
                r = run(model, eps, LAMBDA_GRID, Xtr, ytr, ho, tr, Xte, yte, a.repetitions)
                r.update(dataset=name, epsilon=eps, model=model, n_train=len(Xtr), n_test=len(Xte))
                rows.append(r)
                print(f"{name:<14} eps={eps:<5} {model:<12} acc {100 * r['acc_mean']:.2f} ± "
                      f"{100 * r['acc_std']:.2f} %  {r['sec_mean']:.3f} s/fit  lambda={r['lambda']:g}",
                      flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"repetitions": a.repetitions, "diffprivlib": diffprivlib.__version__,
                       "scikit-learn": sklearn.__version__, "numpy": np.__version__,
                       "machine": platform.processor() or platform.machine(),
                       "threads": os.environ.get("RAYON_NUM_THREADS"),
                       "wall_seconds": time.perf_counter() - t0, "rows": rows},
                      f, indent=1)


if __name__ == "__main__":
    main()
