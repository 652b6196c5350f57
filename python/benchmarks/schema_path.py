"""The schema path's time against the same rows pre-encoded, in one process.

Fits ``PrivateLogisticRegression(schema=...)`` on a table of raw rows (numbers and category
strings) given three ways — a pandas DataFrame, a list of Python rows, an object array — and
the same model on the same rows already encoded through the schema (a float32 array with the
``clip:1`` rule the schema path uses), and prints the best-of-k seconds of each and the ratio
schema / pre-encoded. The table is synthetic (its size and column mix are what matter): four
numeric columns and four categorical ones with 3 to 50 categories.

    python python/benchmarks/schema_path.py                  # 101,856 rows, best of 3
    python python/benchmarks/schema_path.py --rows 5000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from privpred import PrivateLogisticRegression as PLR
from privpred import _schema

CATEGORIES = {"region": 4, "plan": 3, "channel": 12, "branch": 50}


def schema():
    cols = [
        {"name": "age", "type": "numeric", "min": 0, "max": 120, "out_of_bounds": "clip"},
        {"name": "income", "type": "numeric", "min": 0, "max": 1_000_000},
        {"name": "tenure", "type": "numeric", "min": 0, "max": 600},
        {"name": "score", "type": "numeric", "min": -5, "max": 5},
    ]
    cols += [
        {"name": k, "type": "categorical", "categories": [f"{k}-{i}" for i in range(n)]}
        for k, n in CATEGORIES.items()
    ]
    cols.append({"name": "outcome", "type": "label", "classes": ["stayed", "left"]})
    return {"privpred_schema": 1, "header": True, "columns": cols}


def table(n: int, seed: int = 0):
    """The columns (name -> values) and the labels."""
    rng = np.random.default_rng(seed)
    cols = {
        "age": rng.uniform(0, 130, n).round(1),
        "income": rng.uniform(0, 1e6, n),
        "tenure": rng.integers(0, 600, n).astype(np.float64),
        "score": rng.normal(0, 1.5, n).clip(-5, 5),
    }
    for k, m in CATEGORIES.items():
        cols[k] = np.array([f"{k}-{i}" for i in range(m)], dtype=object)[rng.integers(0, m, n)]
    z = cols["income"] / 1e6 + 0.1 * cols["score"] + (cols["region"] == "region-0")
    y = np.where(z > 0.9, "left", "stayed").astype(object)
    return cols, y


def best(f, k: int) -> float:
    times = []
    for _ in range(k):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=101_856)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--method", default="loss-perturbation")
    args = ap.parse_args()

    import pandas as pd

    s = schema()
    cols, y = table(args.rows)
    names = list(cols)
    df = pd.DataFrame(cols)
    obj = np.empty((args.rows, len(names)), dtype=object)
    for j, n in enumerate(names):
        obj[:, j] = cols[n]
    rows = obj.tolist()
    text, parsed = _schema.load_schema(s)
    encoded, _ = _schema.encode(df, parsed, text, y)

    def fit_schema(X):
        return lambda: PLR(method=args.method, epsilon=1.0, schema=s, random_state=0).fit(X, y)

    def fit_encoded():
        PLR(method=args.method, epsilon=1.0, classes=["stayed", "left"], unit_ball="clip:1",
            random_state=0).fit(encoded, y)

    fit_encoded()  # warm
    t_pre = best(fit_encoded, args.repeat)
    out = {"rows": args.rows, "method": args.method, "pre_encoded_s": round(t_pre, 4)}
    for name, X in [("dataframe", df), ("python_rows", rows), ("object_array", obj)]:
        t = best(fit_schema(X), args.repeat)
        out[f"{name}_s"] = round(t, 4)
        out[f"{name}_ratio"] = round(t / t_pre, 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
