#!/usr/bin/env python3
"""Independent golden values for privpred's replace-one DP-SGD accountant.

The replace-one dominating pair of the Poisson-subsampled Gaussian (clip norm 1, noise
multiplier sigma, sampling rate q) is
    P = (1-q) N(0, sigma^2) + q N(1, sigma^2)   vs   Q = (1-q) N(0, sigma^2) + q N(-1, sigma^2)
(privpred_core::pld::pld_epsilon_neighbours proves the domination).

Two computations that share no code with privpred:
 1. one step, exact: delta(eps) = int (p - e^eps q)_+ dx by mpmath quadrature (50 digits),
    split at the single crossing point x* where L(x*) = eps; eps(delta) by root finding.
 2. many steps: Google's dp_accounting (0.6.0) composes a privacy-loss PMF built here with
    scipy/numpy: the P-mass of each cell {L in (k h, (k+1) h]} (cell ends found by bisection on
    L, masses by scipy.stats.norm), rounded UP to (k+1) h (pessimistic: an upper bound) and
    DOWN to k h (optimistic: a lower bound of the discretised mechanism); dp_accounting's
    self_compose (FFT) and get_epsilon_for_delta give a bracket [eps_lo, eps_hi] that contains
    the true eps.

Run: python3 -m venv v && v/bin/pip install dp-accounting==0.6.0 mpmath scipy
     v/bin/python scripts/replace_one_pld_golden.py
The printed numbers are pasted into crates/privpred-core/src/pld.rs's tests.
"""
import mpmath as mp
import numpy as np
from scipy.stats import norm
from dp_accounting.pld import privacy_loss_distribution as pldlib

mp.mp.dps = 50


def loss_mp(x, q, s):
    return mp.log((1 - q) + q * mp.e ** ((2 * x - 1) / (2 * s * s))) - mp.log(
        (1 - q) + q * mp.e ** ((-2 * x - 1) / (2 * s * s)))


def bisect(f, a, b, iters=200):
    """Root of an increasing f on [a, b] by bisection."""
    a, b = mp.mpf(a), mp.mpf(b)
    for _ in range(iters):
        m = (a + b) / 2
        if f(m) > 0:
            b = m
        else:
            a = m
    return (a + b) / 2


def delta_one_step_exact(eps, q, s):
    q, s, eps = mp.mpf(q), mp.mpf(s), mp.mpf(eps)
    # crossing point: L is increasing, find x* with L(x*) = eps
    xs = bisect(lambda x: loss_mp(x, q, s) - eps, -50, 50)
    pdf = lambda x, m: mp.npdf(x, m, s)
    p = lambda x: (1 - q) * pdf(x, 0) + q * pdf(x, 1)
    qq = lambda x: (1 - q) * pdf(x, 0) + q * pdf(x, -1)
    # int_{x*}^inf p - e^eps q, in closed form through the normal CDF
    ccdf = lambda m: mp.ncdf(-(xs - m) / s)
    return ((1 - q) * ccdf(0) + q * ccdf(1)) - mp.e ** eps * ((1 - q) * ccdf(0) + q * ccdf(-1))


def eps_one_step_exact(delta, q, s):
    # delta(eps) decreases in eps
    return bisect(lambda e: delta - delta_one_step_exact(e, q, s), 0, 60, iters=120)


def loss_np(x, q, s):
    z1 = (2 * x - 1) / (2 * s * s)
    z2 = (-2 * x - 1) / (2 * s * s)
    return np.logaddexp(np.log1p(-q), np.log(q) + z1) - np.logaddexp(np.log1p(-q), np.log(q) + z2)


def x_of_loss(v, q, s, lo, hi):
    a = np.full_like(v, lo)
    b = np.full_like(v, hi)
    for _ in range(200):
        m = 0.5 * (a + b)
        up = loss_np(m, q, s) > v
        b = np.where(up, m, b)
        a = np.where(up, a, m)
    return 0.5 * (a + b)


def pmf(q, s, h, pessimistic):
    t = 9.0
    x_lo, x_hi = -1 - t * s, 1 + t * s
    k_lo = int(np.floor(loss_np(x_lo, q, s) / h))
    k_hi = int(np.ceil(loss_np(x_hi, q, s) / h))
    ks = np.arange(k_lo, k_hi + 1)
    xb = x_of_loss(ks * h, q, s, x_lo - 1, x_hi + 1)
    xb = np.clip(xb, x_lo, x_hi)
    cdf = lambda x: (1 - q) * norm.cdf(x / s) + q * norm.cdf((x - 1) / s)
    mass = np.diff(cdf(xb))  # cell (k h, (k+1) h] for k in ks[:-1]
    out = {}
    for i, m in enumerate(mass):
        k = int(ks[i]) + (1 if pessimistic else 0)
        if m > 0:
            out[k] = out.get(k, 0.0) + float(m)
    below = float(cdf(x_lo))
    above = float(1 - cdf(x_hi))
    if pessimistic:
        out[k_lo + 1] = out.get(k_lo + 1, 0.0) + below
        return out, above
    out[k_lo] = out.get(k_lo, 0.0) + below  # optimistic: the tail at the lowest point...
    out[k_hi] = out.get(k_hi, 0.0) + above  # ...and the top tail at the highest kept loss
    return out, 0.0


def eps_composed(q, s, steps, delta, h):
    res = []
    for pess in (False, True):
        m, inf = pmf(q, s, h, pess)
        pld = pldlib.PrivacyLossDistribution.create_from_rounded_probability(
            m, inf, h, pessimistic_estimate=pess)
        res.append(pld.self_compose(steps).get_epsilon_for_delta(delta))
    return res


if __name__ == "__main__":
    for (q, s, d) in [(0.01, 1.0, 1e-5), (0.1, 0.8, 1e-5), (0.5, 2.0, 1e-3)]:
        print(f"one step exact (mpmath): q={q} sigma={s} delta={d}: eps = {mp.nstr(eps_one_step_exact(d, q, s), 15)}")
    for (q, s, k, d, h) in [(0.01, 1.0, 100, 1e-5, 1e-5), (256 / 60000, 1.1, 1000, 1e-5, 2e-5),
                            (0.02, 2.0, 500, 1e-6, 2e-5)]:
        lo, hi = eps_composed(q, s, k, d, h)
        print(f"composed (dp_accounting): q={q} sigma={s} steps={k} delta={d}: eps in [{lo:.6f}, {hi:.6f}]")
