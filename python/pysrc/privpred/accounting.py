"""Privacy accounting: calibration of the five methods and the DP-SGD accountants.

Every function here defaults to the same neighbouring relation as :func:`calibrate` and
:class:`privpred.PrivateLogisticRegression`: **replace-one** (two datasets of the same size
that differ in one example), so the same request gives the same noise everywhere.

The DP-SGD functions follow Opacus's names (``opacus.accountants``): ``sample_rate`` is the
Poisson sampling rate q, ``noise_multiplier`` the ratio sigma of the noise standard deviation
to the clipping norm, ``steps`` the number of noisy steps. Opacus's relation is add/remove
one example: pass ``neighbours="add-remove"`` for Opacus's numbers (then the accountant
defaults to ``rdp``, Opacus's default). Under replace-one the accountant defaults to ``pld``,
the one that bounds that relation.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional

from . import _native

__all__ = ["calibrate", "epsilon_dp_sgd", "get_noise_multiplier"]

_ALIASES = {"prv": "pld"}

#: The neighbouring relation every function of this module defaults to (as ``calibrate``
#: and the estimator).
DEFAULT_NEIGHBOURS = "replace-one"


def _accountant(name: Optional[str], neighbours: str) -> str:
    if name is None:
        return "pld" if neighbours == "replace-one" else "rdp"
    return _ALIASES.get(name, name)


def calibrate(
    method: str,
    epsilon: float,
    delta: float = 0.0,
    budget: Optional[int] = None,
    n: Optional[int] = None,
    lam: Optional[float] = None,
    classes: int = 10,
    batch_size: Optional[int] = None,
    epochs: Optional[float] = None,
    calibration: str = "corrected",
    neighbours: str = DEFAULT_NEIGHBOURS,
) -> Dict[str, Any]:
    """Calibrate a method's noise for (epsilon, delta) and an inference budget.

    The same request and the same result as ``privpred calibrate --json``.

    Parameters
    ----------
    method : str
        ``model-sensitivity``, ``loss-perturbation``, ``dp-sgd``,
        ``prediction-sensitivity`` or ``subsample-aggregate``.
    epsilon : float
        Privacy loss epsilon > 0.
    delta : float, default=0.0
        Failure probability delta in [0, 1) (0: pure epsilon-DP; DP-SGD needs delta > 0).
    budget : int, optional
        Inference budget B >= 1 (private-prediction methods; ignored otherwise).
    n : int, optional
        Training-set size N.
    lam : float, optional
        L2 strength lambda > 0.
    classes : int, default=10
        Number of classes C.
    batch_size, epochs : optional
        DP-SGD's expected batch size b and epochs (q = b/N, steps = ceil(epochs N / b)).
    calibration : {"paper", "corrected", "tight"}, default="corrected"
        Which analysis sets the noise (``paper`` is not always a valid guarantee).
    neighbours : {"replace-one", "add-remove"}, default="replace-one"
        The neighbouring relation of the guarantee (the default of every function here
        and of the estimator).

    Returns
    -------
    dict
        The guarantee: method, calibration, neighbours, epsilon, delta, budget, noise
        (distribution and parameter), valid_guarantee, assumptions, notes, and for
        DP-SGD the noise multiplier, epsilon spent, sampling rate and steps.

    Raises
    ------
    ValueError
        For an argument out of range (the message names it and the valid range).
    """
    return json.loads(
        _native.calibrate(
            method, float(epsilon), float(delta), budget, n,
            None if lam is None else float(lam), int(classes), batch_size,
            None if epochs is None else float(epochs), calibration, neighbours,
        )
    )


def epsilon_dp_sgd(
    sample_rate: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    accountant: Optional[str] = None,
    neighbours: str = DEFAULT_NEIGHBOURS,
) -> float:
    """Epsilon spent by DP-SGD (the Poisson-subsampled Gaussian mechanism) at delta.

    Under replace-one neighbours by default, as :func:`calibrate` and the estimator; pass
    ``neighbours="add-remove"`` for Opacus's relation.

    Parameters
    ----------
    sample_rate : float
        Poisson sampling rate q in (0, 1] (Opacus: ``sample_rate``).
    noise_multiplier : float
        Sigma > 0: noise standard deviation / clipping norm.
    steps : int
        Number of noisy steps >= 1.
    delta : float
        Delta in (0, 1).
    accountant : {"rdp", "pld", "rdp-classic", "best", "prv"} or None, default=None
        ``rdp``: Renyi DP (Mironov, Talwar & Zhang 2019), the smaller of the classic and
        improved conversions (as Opacus's ``RDPAccountant``; add-remove only); ``pld``:
        privacy-loss distribution with pessimistic discretisation; ``prv`` is accepted as
        an alias of ``pld`` (Opacus's PRV accountant composes the same distribution
        numerically). None: ``pld`` under replace-one, ``rdp`` under add-remove.
    neighbours : {"replace-one", "add-remove"}, default="replace-one"
        The neighbouring relation (Opacus's is add-remove; replace-one needs the ``pld``
        accountant).

    Returns
    -------
    float
        An upper bound on epsilon.
    """
    return _native.epsilon_dp_sgd(
        float(sample_rate), float(noise_multiplier), int(steps), float(delta),
        _accountant(accountant, neighbours), neighbours,
    )


def get_noise_multiplier(
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    epochs: Optional[float] = None,
    steps: Optional[int] = None,
    accountant: Optional[str] = None,
    epsilon_tolerance: float = 0.01,
    neighbours: str = DEFAULT_NEIGHBOURS,
) -> float:
    """The noise multiplier that makes DP-SGD (target_epsilon, target_delta)-DP.

    Under replace-one neighbours by default, as :func:`calibrate` and the estimator (the
    same request gives :func:`calibrate`'s sigma); pass ``neighbours="add-remove"`` for
    Opacus's relation and numbers.

    Opacus's ``get_noise_multiplier``: give ``steps``, or ``epochs`` (then
    ``steps = int(epochs / sample_rate)``, as Opacus). The result is the smallest
    sigma on a 1e-4 grid (rounded up) whose epsilon is <= ``target_epsilon``: never
    above the target, and within 1e-4 in sigma of the exact answer, which is at least
    as tight as Opacus's ``epsilon_tolerance`` (accepted, not needed).

    Parameters
    ----------
    target_epsilon : float
        Target epsilon > 0.
    target_delta : float
        Target delta in (0, 1).
    sample_rate : float
        Poisson sampling rate q in (0, 1].
    epochs : float, optional
        Epochs (used when ``steps`` is None).
    steps : int, optional
        Number of noisy steps.
    accountant : str or None, default=None
        As in :func:`epsilon_dp_sgd` (None: ``pld`` under replace-one, ``rdp`` under
        add-remove).
    epsilon_tolerance : float, default=0.01
        Accepted for Opacus compatibility; the search is finer.
    neighbours : {"replace-one", "add-remove"}, default="replace-one"
        The neighbouring relation.

    Returns
    -------
    float
        The noise multiplier sigma.

    Raises
    ------
    ValueError
        For arguments out of range, or neither ``steps`` nor ``epochs``.
    """
    if steps is None:
        if epochs is None:
            raise ValueError("invalid steps = None: give steps >= 1 or epochs > 0")
        if not (isinstance(epochs, (int, float)) and math.isfinite(epochs) and epochs > 0):
            raise ValueError(f"invalid epochs = {epochs}: must be a finite number > 0")
        steps = int(epochs / sample_rate)
    sigma, _eps = _native.noise_multiplier(
        float(target_epsilon), float(target_delta), float(sample_rate), int(steps),
        _accountant(accountant, neighbours), neighbours,
    )
    return sigma
