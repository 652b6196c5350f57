"""The data owner's privacy odometer: a limit per dataset on the total (epsilon, delta) of
every model trained from it, kept durably in an SQLite file or PostgreSQL (the same store as
``privpred train --odometer`` and ``privpred odometer``).

Every fit is another release of its training data. With ``odometer=...`` on
:class:`privpred.PrivateLogisticRegression`, each ``fit`` is charged its whole guarantee
(for prediction sensitivity and subsample-and-aggregate: the guarantee of all B answers)
before any training; a fit that would take the dataset's total past its limit raises
``ValueError`` and trains nothing. Totals add up by basic composition (epsilons and deltas
are summed). The odometer is created by :func:`set_limit`, never by a fit, and a dataset
without a limit is refused.

A dataset is keyed by :func:`dataset_key` (a SHA-256 over its rows, in any order: the key
``privpred odometer limit --dataset`` computes for the same numbers), or by a name given as
``odometer_key``. The odometer is the data owner's private record; never publish it.
"""

import json
import os
from typing import Any, Dict, List, Optional

import numpy as np

from . import _native

__all__ = ["dataset_key", "set_limit", "show"]


def _encode(X, y):
    X = np.ascontiguousarray(np.asarray(X, dtype=np.float32))
    if X.ndim != 2:
        raise ValueError(f"invalid X: expected a 2-d array, got {X.ndim} dimensions")
    _, y_enc = np.unique(np.asarray(y), return_inverse=True)
    return X, np.ascontiguousarray(y_enc.reshape(-1), dtype=np.uint32)


def dataset_key(X, y) -> str:
    """The odometer's key of the training set (X, y), as ``fit`` computes it: labels are
    encoded as their index among the sorted distinct labels, features as float32."""
    X, y_enc = _encode(X, y)
    return _native.dataset_identity(X, y_enc)


def set_limit(
    odometer,
    epsilon: float,
    delta: float = 0.0,
    *,
    X=None,
    y=None,
    key: Optional[str] = None,
    neighbours: str = "replace-one",
) -> Dict[str, Any]:
    """Set (or change) a dataset's limit, creating the odometer if it does not exist.

    Give the training data (``X``, ``y``) or its ``key``. Returns the dataset's record:
    ``limit``, ``spent`` (``fits``, ``epsilon``, ``delta``) and ``fits``."""
    if key is None:
        if X is None or y is None:
            raise ValueError("invalid arguments: give X and y, or key")
        key = dataset_key(X, y)
    return json.loads(
        _native.odometer_limit(os.fspath(odometer), key, float(epsilon), float(delta), neighbours)
    )


def show(odometer, key: Optional[str] = None) -> List[Dict[str, Any]]:
    """Every dataset's record (or the one of ``key``): limit, total spent, fits."""
    return json.loads(_native.odometer_show(os.fspath(odometer), key))
