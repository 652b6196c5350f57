#!/usr/bin/env python3
"""scikit-learn baseline for the L-BFGS benchmark of privpred-linear.

Fits `LogisticRegression(solver="lbfgs")` (multinomial) on full MNIST with the same data,
preprocessing, regularisation and tolerance as `cargo bench -p privpred-linear --bench
linear_bench`, and prints wall time, iterations and test accuracy.

  * data: the raw IDX files (default ~/.cache/privpred/mnist), pixels / 255, each example scaled
    to unit L2 norm (privpred's default preprocessing);
  * objective: privpred minimises (1/N) sum CE + (lambda/2)||W||^2 with no intercept;
    sklearn (>= 1.2, lbfgs) minimises (1/N) sum CE + (1/(2 C N))||W||^2 (l2_reg_strength =
    1/(C * sw_sum)), so C = 1 / (N * lambda) and fit_intercept=False give the same objective;
  * tolerance: sklearn's `tol` is L-BFGS-B's `gtol` on max|g_i| of that same objective:
    tol = 1e-4 matches privpred's `GradNorm::Max` criterion (privpred's default
    `GradNorm::L2` is stricter).

Usage: python3 benches/sklearn_baseline.py [LAMBDA] [MNIST_DIR]   (pip install scikit-learn numpy)
"""
import os
import struct
import sys
import time

import numpy as np


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(d):
    def x(name):
        a = read_idx(os.path.join(d, name)).reshape(-1, 784).astype(np.float32) / 255.0
        return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-30)
    y = lambda name: read_idx(os.path.join(d, name)).astype(np.int64)
    return (x("train-images-idx3-ubyte"), y("train-labels-idx1-ubyte"),
            x("t10k-images-idx3-ubyte"), y("t10k-labels-idx1-ubyte"))


def main():
    from sklearn.linear_model import LogisticRegression
    import sklearn

    lam = float(sys.argv[1]) if len(sys.argv) > 1 else 1e-4
    d = sys.argv[2] if len(sys.argv) > 2 else os.path.expanduser("~/.cache/privpred/mnist")
    xtr, ytr, xte, yte = load(d)
    n = xtr.shape[0]
    for name, x in [("float64", xtr.astype(np.float64)), ("float32", xtr)]:
        clf = LogisticRegression(C=1.0 / (n * lam), solver="lbfgs", tol=1e-4, max_iter=10000,
                                 fit_intercept=False)
        t = time.perf_counter()
        clf.fit(x, ytr)
        wall = time.perf_counter() - t
        acc = (clf.predict(xte.astype(x.dtype)) == yte).mean()
        print(f"sklearn {sklearn.__version__} LogisticRegression(lbfgs) {name}, lambda={lam:g}, "
              f"max|grad|<=1e-4: {wall:.3f} s, {int(clf.n_iter_[0])} iterations, "
              f"test accuracy {100 * acc:.2f} %")


if __name__ == "__main__":
    main()
