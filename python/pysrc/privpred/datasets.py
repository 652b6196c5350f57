"""Datasets through the command line's loader and cache (``~/.cache/privpred``)."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _native

__all__ = ["load"]


def load(
    spec: str, data_dir: Optional[str] = None, fetch: bool = True
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
    """Load a dataset exactly as ``privpred train --dataset SPEC`` does.

    Parameters
    ----------
    spec : str
        ``mnist``, ``fashion-mnist``, ``digits``, ``csv:PATH``, ``idx:DIR``, ...
    data_dir : str, optional
        Directory searched first (``--data-dir``); then ``$PRIVPRED_DATA_DIR``, the cache.
    fetch : bool, default=True
        Whether a missing named dataset may be fetched into the cache.

    Returns
    -------
    X_train, y_train, X_test, y_test : ndarray
        Raw features (float32, e.g. pixels 0..255) and labels (uint32); the same split as
        the command line (digits: its fixed 20 % test hold-out). An image set's rows are
        mapped as the command line maps them with ``unit_ball="normalize"`` (each row scaled
        to unit length; the scale 1/255 does not change that direction).
    provenance : dict
        Name, source, checksum, whether it was verified, classes, feature shape.

    Raises
    ------
    ValueError
        For an unknown specification or a dataset that is absent and not fetched.
    """
    xtr, ytr, xte, yte, info = _native.load_dataset(spec, data_dir, fetch)
    return xtr, ytr, xte, yte, json.loads(info)
