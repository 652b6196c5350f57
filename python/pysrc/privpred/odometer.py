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


def _encode(X, y, schema=None, classes=None):
    """The rows as ``fit`` keys them: through the schema (a DataFrame or raw rows with
    category strings), else as float32 numbers; labels as ``fit`` encodes them (the schema's
    or the declared ``classes``' positions, else the sorted distinct labels)."""
    if schema is not None:
        from . import _schema

        text, parsed = _schema.load_schema(schema)
        Xe, y_enc = _native.encode_table(text, _schema.rows(X, parsed), _schema.labels(y))
        return Xe, np.ascontiguousarray(y_enc, dtype=np.uint32)
    try:
        X = np.ascontiguousarray(np.asarray(X, dtype=np.float32))
    except (TypeError, ValueError):
        raise ValueError(
            "invalid X: not all numbers (a table with category columns is keyed through its "
            "schema: give schema=, as to the estimator)"
        ) from None
    if X.ndim != 2:
        raise ValueError(f"invalid X: expected a 2-d array, got {X.ndim} dimensions")
    y = np.asarray(y)
    if classes is not None:
        lookup = {c: i for i, c in enumerate(np.asarray(classes).tolist())}
        try:
            y_enc = np.asarray([lookup[v] for v in y.tolist()], dtype=np.uint32)
        except KeyError:
            raise ValueError("invalid y: a label is not one of the declared classes") from None
    else:
        _, y_enc = np.unique(y, return_inverse=True)
    return X, np.ascontiguousarray(y_enc.reshape(-1), dtype=np.uint32)


def dataset_key(X, y, *, schema=None, classes=None) -> str:
    """Compute the odometer's key of the training set (X, y), as ``fit`` computes it.

    The rows are keyed as ``fit`` reads them: through ``schema`` when given (a DataFrame or
    raw rows with category strings, as the estimator's ``schema``), else as float32
    numbers; labels as their index among the ``classes`` declared to the estimator, or the
    schema's, else among the sorted distinct labels. The key does not depend on the order
    of the rows, and it is the key ``privpred odometer limit --dataset`` computes for the
    same rows.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        The whole training input.
    y : array-like of shape (n_samples,)
        The training labels.
    schema : str, os.PathLike or dict, optional
        The table's schema (as the estimator's ``schema``).
    classes : array-like, optional
        The class labels declared to the estimator (``classes``).

    Returns
    -------
    str
        The dataset's key: ``sha256:`` and the hex digest over its rows.

    Raises
    ------
    ValueError
        If ``X`` is not a 2-d array of numbers (without a schema), a row does not match the
        schema, or ``X`` and ``y`` differ in length.
    """
    X, y_enc = _encode(X, y, schema, classes)
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
    schema=None,
    classes=None,
) -> Dict[str, Any]:
    """Set (or change) a dataset's limit, creating the odometer if it does not exist.

    Give the training data (``X``, ``y``) or its ``key``.

    Parameters
    ----------
    odometer : str or os.PathLike
        The odometer: an SQLite path or a postgres:// URL.
    epsilon : float
        The dataset's limit on the total epsilon of its fits.
    delta : float, default=0.0
        The dataset's limit on the total delta of its fits.
    X : array-like of shape (n_samples, n_features), optional
        The training features (with ``y``) whose :func:`dataset_key` keys the limit.
    y : array-like of shape (n_samples,), optional
        The training labels (with ``X``).
    key : str, optional
        The dataset's key, instead of ``X`` and ``y``.
    neighbours : {"replace-one", "add-remove"}, default="replace-one"
        The neighbouring relation of the limit.
    schema : str, os.PathLike or dict, optional
        The table's schema, to key ``X`` as ``fit`` reads it (see :func:`dataset_key`).
    classes : array-like, optional
        The class labels declared to the estimator (see :func:`dataset_key`).

    Returns
    -------
    dict
        The dataset's record: ``limit``, ``spent`` (``fits``, ``epsilon``, ``delta``) and
        ``fits``.

    Raises
    ------
    ValueError
        If neither ``X`` and ``y`` nor ``key`` is given, or for an invalid key,
        relation or limit.
    """
    if key is None:
        if X is None or y is None:
            raise ValueError("invalid arguments: give X and y, or key")
        key = dataset_key(X, y, schema=schema, classes=classes)
    return json.loads(
        _native.odometer_limit(os.fspath(odometer), key, float(epsilon), float(delta), neighbours)
    )


def show(odometer, key: Optional[str] = None) -> List[Dict[str, Any]]:
    """List every dataset's record (or the one of ``key``): limit, total spent, fits.

    Parameters
    ----------
    odometer : str or os.PathLike
        The odometer: an SQLite path or a postgres:// URL.
    key : str, optional
        Only this dataset's record (default: every dataset's).

    Returns
    -------
    list of dict
        One record per dataset: ``limit``, ``spent`` and ``fits``.
    """
    return json.loads(_native.odometer_show(os.fspath(odometer), key))
