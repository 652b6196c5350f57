"""Audit of diffprivlib's GaussianNB on a worst-case pair of neighbouring data sets.

`diffprivlib.models.GaussianNB(epsilon, bounds)` spends epsilon/3 on the class counts and
epsilon/3 each on the per-class means and variances (split over the features), and composes
the classes in parallel. Parallel composition over classes holds when neighbouring data sets
differ by one added or removed row: that row sits in one class. Under replace-one neighbours
(privpred's default relation) one replaced row can leave one class and join another, so two
classes' counts, sums and squared deviations move at once, and each of the three parts can
spend twice its share: GaussianNB(epsilon) is then at most 2*epsilon-DP, and epsilon/2 is
what gives epsilon. Under add/remove neighbours the released class counts are rebalanced to
sum to the exact number of rows, which an added row changes, so no epsilon holds there.

The audit (one feature with bounds [0, 1], n rows per class):
- D: class 0 holds the row x = 1 and n - 1 zeros, class 1 holds n zeros;
- D': that row replaced by x = 1 in class 1 (class 0: n - 1 zeros, class 1: the row and n zeros).
An exploration phase (its own seeds) picks an event S on the released model from a small
grid of thresholds; a validation phase with fresh seeds counts S under D and D', and the
lower bound ln(p_lo(D) / p_hi(D')) with Clopper-Pearson bounds at a false-positive rate of
alpha (both sides together) is a lower bound on the epsilon GaussianNB spends on this pair. A
lower bound above the nominal epsilon refutes the claim for replace-one neighbours.

The add/remove part fits D and D with one extra row and checks that every released count
vector sums to the exact number of rows (which differs between the two).

    python python/benchmarks/audit_diffprivlib_gnb.py [--epsilon 1,2] [--trials 100000]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import multiprocessing as mp
import time
import warnings

import numpy as np
from scipy.stats import beta

N_PER_CLASS = 50
ALPHA = 1e-6


def pair():
    """The worst-case replace-one pair (D, D'): x in column 0, labels."""
    n = N_PER_CLASS
    x_d = np.zeros((2 * n, 1))
    x_d[0, 0] = 1.0
    y_d = np.array([0] * n + [1] * n)
    x_p = x_d.copy()
    y_p = y_d.copy()
    y_p[0] = 1  # the same row, moved to class 1
    return (x_d, y_d), (x_p, y_p)


def released(args):
    """(count_0, noisy sum_0, noisy sum_1, noisy ssd_0, noisy ssd_1) of fits seeds[0]..seeds[1]."""
    (x, y), eps, lo, hi = args
    from diffprivlib.models import GaussianNB

    out = np.empty((hi - lo, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, seed in enumerate(range(lo, hi)):
            m = GaussianNB(epsilon=eps, bounds=([0.0], [1.0]), random_state=seed).fit(x, y)
            c = m.class_count_
            out[i] = (c[0], m.theta_[0, 0] * c[0], m.theta_[1, 0] * c[1],
                      (m.var_[0, 0] - m.epsilon_) * c[0], (m.var_[1, 0] - m.epsilon_) * c[1])
    return out


def fits(data, eps, first_seed, trials, pool):
    chunk = max(1, trials // 64)
    jobs = [(data, eps, s, min(s + chunk, first_seed + trials))
            for s in range(first_seed, first_seed + trials, chunk)]
    return np.vstack(pool.map(released, jobs))


# the event S = {count_0 >= a, sum_0 >= b, sum_1 <= c, ssd_0 >= d, ssd_1 <= e}; None: no condition
GRID = {
    "count_0": [None, N_PER_CLASS, N_PER_CLASS + 1, N_PER_CLASS + 3],
    "sum_0": [None, 1.0, 1.5],
    "sum_1": [None, 0.0],
    "ssd_0": [None, 0.6, 0.9, 1.2],
    "ssd_1": [None, 0.1, 0.3],
}


def in_event(out, ev):
    keep = np.ones(len(out), dtype=bool)
    for j, (name, t) in enumerate(zip(GRID, ev)):
        if t is None:
            continue
        keep &= out[:, j] >= t if name in ("count_0", "sum_0", "ssd_0") else out[:, j] <= t
    return keep


def cp_lower(k, n, a):
    return 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))


def cp_upper(k, n, a):
    return 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))


def audit(eps, trials, pool):
    d, p = pair()
    explore = trials // 5
    e_d = fits(d, eps, 10_000_000, explore, pool)
    e_p = fits(p, eps, 20_000_000, explore, pool)
    best, best_score = None, -math.inf
    for ev in itertools.product(*GRID.values()):
        kd, kp = int(in_event(e_d, ev).sum()), int(in_event(e_p, ev).sum())
        if kd < 50:
            continue
        # the validation bound this event would give on the exploration counts
        score = math.log(cp_lower(kd, explore, ALPHA / 2) / max(cp_upper(kp, explore, ALPHA / 2),
                                                                 1e-300))
        if score > best_score:
            best, best_score = ev, score
    v_d = fits(d, eps, 30_000_000, trials, pool)
    v_p = fits(p, eps, 40_000_000, trials, pool)
    kd, kp = int(in_event(v_d, best).sum()), int(in_event(v_p, best).sum())
    lo_d = cp_lower(kd, trials, ALPHA / 2)
    hi_p = cp_upper(kp, trials, ALPHA / 2)
    return {
        "nominal_epsilon": eps,
        "event": {k: v for k, v in zip(GRID, best) if v is not None},
        "trials": trials,
        "hits_D": kd,
        "hits_D_prime": kp,
        "point_estimate": math.log(kd / kp) if kd and kp else None,
        "epsilon_lower_bound": math.log(lo_d / hi_p),
        "alpha": ALPHA,
        "refuted": math.log(lo_d / hi_p) > eps,
    }


def add_remove_check(eps, fits_each=1000):
    """Every released count vector sums to the exact row count, for D and for D plus a row."""
    from diffprivlib.models import GaussianNB

    (x, y), _ = pair()
    x_plus = np.vstack([x, [[0.0]]])
    y_plus = np.append(y, 0)
    sums = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for data, n in ((x, y), (x_plus, y_plus)):
            got = {float(GaussianNB(epsilon=eps, bounds=([0.0], [1.0]), random_state=s)
                         .fit(data, n).class_count_.sum()) for s in range(fits_each)}
            sums.add((len(n), tuple(sorted(got))))
    return {"fits_each": fits_each,
            "released_count_sums": {str(n): list(s) for n, s in sorted(sums)}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epsilon", default="1,2")
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--json")
    a = ap.parse_args()
    import diffprivlib

    t0 = time.time()
    rows = []
    with mp.Pool(min(2, mp.cpu_count())) as pool:
        for eps in [float(e) for e in a.epsilon.split(",")]:
            r = audit(eps, a.trials, pool)
            rows.append(r)
            print(f"GaussianNB(epsilon={eps:g}), replace-one pair: event {r['event']}, "
                  f"hits {r['hits_D']} / {r['hits_D_prime']} of {r['trials']}, "
                  f"point estimate {r['point_estimate']:.3f}, lower bound "
                  f"{r['epsilon_lower_bound']:.3f} (alpha {ALPHA:g}): "
                  f"{'refuted' if r['refuted'] else 'holds'}", flush=True)
    ar = add_remove_check(rows[0]["nominal_epsilon"])
    print(f"add/remove: released class counts sum to {ar['released_count_sums']} "
          f"(rows: released sums) over {ar['fits_each']} fits each")
    out = {"diffprivlib": diffprivlib.__version__, "numpy": np.__version__,
           "rows_per_class": N_PER_CLASS, "replace_one": rows, "add_remove": ar,
           "seconds": round(time.time() - t0, 1)}
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        import os

        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
