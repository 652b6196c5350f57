"""Tables through a schema: the estimator's ``schema=`` (the file ``privpred train --schema``
reads, or the same JSON as a dict) and raw rows handed to the Rust core as text cells."""

from __future__ import annotations

import json
import math
import numbers
import os
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from . import _native


def load_schema(schema: Any) -> Tuple[str, Dict[str, Any]]:
    """The checked schema as canonical JSON text and as a dict.

    ``schema`` is a path to a schema file (``str`` or ``os.PathLike``) or the schema itself
    as a dict. A ValueError names what is wrong (the CLI's message).
    """
    if isinstance(schema, dict):
        try:
            text = json.dumps(schema)
        except (TypeError, ValueError) as e:
            raise ValueError(f"invalid schema: not JSON-serialisable ({e})") from None
        source = "schema="
    elif isinstance(schema, (str, os.PathLike)):
        source = os.fspath(schema)
        with open(source, "rb") as f:
            raw = f.read((64 << 20) + 1)
        if len(raw) > 64 << 20:
            raise ValueError(f"invalid schema {source}: larger than 64 MiB: not a schema file")
        text = raw.decode("utf-8", errors="replace")
    else:
        raise ValueError(
            f"invalid schema = {schema!r}: must be a path to a schema file, a dict, or None"
        )
    canonical = _native.schema_check(text, source)
    return canonical, json.loads(canonical)


def cell(v: Any) -> str:
    """One value as the text cell a CSV would hold (missing values as an empty cell)."""
    if v is None:
        return ""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="replace")
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        if math.isnan(f):
            return ""
        return repr(f)
    return str(v)


def feature_names(schema: Dict[str, Any]) -> List[str]:
    """The schema's columns other than the label, in order."""
    return [c["name"] for c in schema["columns"] if c["type"] != "label"]


def classes_of(schema: Dict[str, Any]) -> List[str]:
    """The label column's classes."""
    return next(c["classes"] for c in schema["columns"] if c["type"] == "label")


def rows(X: Any, schema: Dict[str, Any]) -> List[List[str]]:
    """The rows of ``X`` as text cells in the schema's column order.

    A DataFrame (anything with ``columns``) is read by column name: every column the schema
    declares except the label must be present (extra ones, the label included, are dropped).
    Anything else is read as a 2-D array of rows in the schema's order, with or without the
    label column.
    """
    if hasattr(X, "columns") and hasattr(X, "__getitem__"):
        names = feature_names(schema)
        have = [str(c) for c in X.columns]
        missing = [n for n in names if n not in have]
        if missing:
            shown = ", ".join(f"`{n}`" for n in missing[:10])
            raise ValueError(
                f"invalid X: the schema's column(s) {shown} are not among the DataFrame's "
                f"columns ({len(have)} columns)"
            )
        cols = [list(np.asarray(X[n], dtype=object)) for n in names]
        return [[cell(v) for v in r] for r in zip(*cols)]
    if not isinstance(X, np.ndarray):
        # a list of rows may be ragged: each row's length is checked against the schema
        out = []
        for r in X:
            if isinstance(r, (str, bytes)) or not hasattr(r, "__iter__"):
                raise ValueError(
                    "invalid X: expected a 2-D table of rows (a sequence of rows, each a "
                    "sequence of values); a single row is [row]"
                )
            out.append([cell(v) for v in r])
        return out
    if X.ndim != 2:
        raise ValueError(
            f"invalid X: expected a 2-D table of rows (got {X.ndim} dimension(s)); a single "
            "row is X[None, :]"
        )
    return [[cell(v) for v in r] for r in X]


def _coded(values: Any):
    """A column as (its distinct text cells, each row's index into them): each distinct value
    is turned into a text cell once (missing values, None and NaN, get the code -1)."""
    index: Dict[Any, int] = {}
    codes = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        k = index.get(v)
        if k is None:
            k = index[v] = len(index)
        codes[i] = k
    cells = [cell(v) for v in index]
    missing = np.asarray([c == "" for c in cells], dtype=bool)
    if missing.any():
        codes[missing[codes]] = -1
    return cells, codes


def _column(values: Any, kind: str):
    """One column for the core: a numeric column of numbers as float64 (NaN missing), any
    other column as distinct cells with codes."""
    a = values if isinstance(values, np.ndarray) else np.asarray(values)
    if kind == "numeric" and a.dtype.kind in "iuf":
        return np.ascontiguousarray(a, dtype=np.float64)
    if kind == "numeric" and a.dtype.kind == "O":
        try:  # numbers (None as NaN: missing) held as objects
            if not any(isinstance(v, (bool, np.bool_, str, bytes)) for v in a.tolist()):
                return np.ascontiguousarray(a.astype(np.float64))
        except (TypeError, ValueError):
            pass
    if a.dtype.kind in "iufb" or a.dtype.kind in "US":
        uniq, inv = np.unique(a, return_inverse=True)
        cells, codes = _coded(uniq.tolist())
        return cells, np.ascontiguousarray(codes[inv.reshape(-1)])
    return _coded(a.tolist())


def _columns(X: Any, schema: Dict[str, Any]):
    """``X``'s feature columns in the schema's order, or None where ``X`` is not a 2-D
    array, a rectangular list of rows or a DataFrame with them (the row path then reads it
    and words the error)."""
    feats = [c for c in schema["columns"] if c["type"] != "label"]
    if hasattr(X, "columns") and hasattr(X, "__getitem__"):
        have = {str(c) for c in X.columns}
        if any(c["name"] not in have for c in feats):
            return None
        return [_column(np.asarray(X[c["name"]]), c["type"]) for c in feats]
    if isinstance(X, (list, tuple)) and X and not isinstance(X[0], (str, bytes)):
        try:  # a rectangular list of rows: its columns, each encoded at once
            X = np.asarray(X, dtype=object)
        except ValueError:
            return None
    if not isinstance(X, np.ndarray) or X.ndim != 2 or len(X) == 0:
        return None
    names = [c["type"] for c in schema["columns"]]
    if X.shape[1] == len(feats):
        idx = list(range(len(feats)))
    elif X.shape[1] == len(names):
        idx = [i for i, t in enumerate(names) if t != "label"]
    else:
        return None
    return [_column(X[:, i], c["type"]) for i, c in zip(idx, feats)]


def encode(X: Any, schema: Dict[str, Any], text: str, y: Any = None):
    """The encoded rows of ``X`` (and, with ``y``, the class indices) through the schema:
    column by column where ``X`` is a 2-D array, a rectangular list of rows or a DataFrame
    (each distinct cell encoded once, numbers without text cells), else row by row; the
    same encoding and messages."""
    cols = None
    try:
        cols = _columns(X, schema)
    except TypeError:  # unhashable cells: the row path reads them
        cols = None
    if cols is not None:
        lab = None
        if y is not None:
            a = np.asarray(y, dtype=object)
            if a.ndim != 1:
                raise ValueError(
                    f"invalid y: expected a 1-D array of labels (got {a.ndim} dimension(s))"
                )
            if len(a) != len(X):
                raise ValueError(
                    f"dimension mismatch: {len(X)} rows of X but {len(a)} labels in y"
                )
            lab = _column(np.asarray(y), "label")
        return _native.encode_columns(text, cols, lab)
    if y is None:
        return _native.encode_table(text, rows(X, schema))
    return _native.encode_table(text, rows(X, schema), labels(y))


def labels(y: Sequence[Any]) -> List[str]:
    """The labels as text cells."""
    a = np.asarray(y, dtype=object)
    if a.ndim != 1:
        raise ValueError(f"invalid y: expected a 1-D array of labels (got {a.ndim} dimension(s))")
    return [cell(v) for v in a]


def classes_like(classes: List[str], y: Any) -> np.ndarray:
    """The schema's classes in ``y``'s type where they read as such (numbers for numeric
    labels), else as strings: ``predict`` then returns values comparable to ``y``."""
    y = np.asarray(y)
    if y.dtype.kind in "iufb":
        try:
            vals = [float(c) for c in classes]
            out = np.asarray(vals).astype(y.dtype)
            if all(float(o) == v for o, v in zip(out, vals)):
                return out
        except (ValueError, OverflowError):
            pass
    return np.asarray(classes)


def _real(name: str, v: Any) -> float:
    """A number parameter as float; a ValueError names the parameter otherwise."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise ValueError(f"invalid {name} = {v!r}: must be a number")
    return float(v)


def _names(name: str, v: Any) -> List[str]:
    """Column names: one name or a sequence of names."""
    if isinstance(v, str):
        return [v]
    try:
        out = list(v)
    except TypeError:
        raise ValueError(f"invalid {name} = {v!r}: must be a column name or a sequence of column names") from None
    if not all(isinstance(n, str) for n in out):
        raise ValueError(f"invalid {name} = {v!r}: must be a column name or a sequence of column names")
    return out


def draft_schema(
    data: Any,
    *,
    epsilon: float,
    delta: float,
    label: Any = None,
    quantile: float = 0.01,
    categorical: Any = (),
    ignore: Any = (),
    header: bool = True,
    odometer: Any = None,
    odometer_key: Any = None,
    seed: Any = None,
) -> Dict[str, Any]:
    """Draft a table's schema with differential privacy, as ``privpred data schema --epsilon``.

    The same code as the command line: each numeric column's bounds are its ``quantile`` and
    ``1 - quantile`` quantiles chosen by the exponential mechanism over a public grid of
    round numbers (rows outside them are clipped), each categorical column's values and the
    label's classes are kept by a thresholded histogram (values held by few rows are left
    out), and the cost, ``(epsilon, delta)`` under replace-one neighbours split over the
    columns by basic composition, is recorded in the schema's ``drafted``. With an
    ``odometer`` the whole ``(epsilon, delta)`` is charged to ``odometer_key``'s limit
    before anything drafted is returned: a draft past the limit raises ``ValueError`` and
    returns nothing, and the charge stays once the data has been read. The header, the label
    and the column types are declared, not read from the data: every column not named in
    ``categorical`` or ``ignore`` (and not the label) is numeric.

    Parameters
    ----------
    data : str, os.PathLike, DataFrame or sequence of rows
        The table: a CSV or Parquet file's path, a DataFrame (its column names are the
        header), or rows of values (a 2-d array or a list of rows; with ``header``, the
        first row holds the column names).
    epsilon : float
        The draft's total epsilon, > 0.
    delta : float
        The draft's total delta, in (0, 1) (the lists' thresholded histogram needs
        delta > 0; e.g. 1e-6, below 1/N).
    label : str, optional
        The label column's name (default: the last column).
    quantile : float, default=0.01
        The quantile q of the numeric bounds, in (0, 0.5): the bounds are the q and 1 - q
        quantiles.
    categorical : str or sequence of str, default=()
        The categorical columns.
    ignore : str or sequence of str, default=()
        Columns to leave out (not read, they cost nothing).
    header : bool, default=True
        Whether the first row of a file (or of the rows) names the columns; without, the
        columns are ``column_0``, ``column_1``, ….
    odometer : str or os.PathLike, optional
        The data owner's privacy odometer (an SQLite path or a postgres:// URL, set up with
        :func:`privpred.odometer.set_limit`), charged before the draft is returned.
    odometer_key : str, optional
        The dataset's key in the odometer (required with ``odometer``): the key whose limit
        the owner set. It is recorded in the schema's ``drafted``, and a fit on the schema
        with the same odometer charges it too.
    seed : int, optional
        An experiment seed: the draft's noise can be regenerated from it, so it is not a
        release (recorded in ``drafted``; refused with ``odometer``). Default: the
        operating system's generator.

    Returns
    -------
    dict
        The drafted schema (as the estimator's ``schema`` takes it, or to write as JSON to
        the file ``privpred train --schema`` reads).

    Raises
    ------
    ValueError
        For a parameter outside its range (naming it), a table that does not fit the
        declarations, ``seed`` with ``odometer``, ``odometer`` without ``odometer_key``, or
        a draft the odometer refuses.
    OSError
        If the file cannot be read.
    """
    eps = _real("epsilon", epsilon)
    dlt = None if delta is None else _real("delta", delta)
    q = _real("quantile", quantile)
    if label is not None and not isinstance(label, str):
        raise ValueError(f"invalid label = {label!r}: must be a column name or None (the last column)")
    if not isinstance(header, (bool, np.bool_)):
        raise ValueError(f"invalid header = {header!r}: must be True or False")
    if seed is not None and (
        isinstance(seed, (bool, np.bool_))
        or not isinstance(seed, numbers.Integral)
        or not 0 <= int(seed) < 2**64
    ):
        raise ValueError(
            f"invalid seed = {seed!r}: must be an integer in [0, 2**64), or None (the "
            "operating system's generator)"
        )
    if odometer is not None and not isinstance(odometer, (str, os.PathLike)):
        raise ValueError(
            f"invalid odometer = {odometer!r}: must be an SQLite path or a postgres:// URL"
        )
    if odometer_key is not None and not isinstance(odometer_key, str):
        raise ValueError(f"invalid odometer_key = {odometer_key!r}: must be a str")
    path = table = None
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        note = f"schema draft of {path}"
    elif hasattr(data, "columns") and hasattr(data, "__getitem__"):
        if not header:
            raise ValueError(
                "invalid header = False with a DataFrame: its column names are its header"
            )
        names = [str(c) for c in data.columns]
        cols = [list(np.asarray(data[c], dtype=object)) for c in data.columns]
        table = [names] + [[cell(v) for v in r] for r in zip(*cols)]
        note = "schema draft of a DataFrame (Python)"
    else:
        if isinstance(data, np.ndarray) and data.ndim != 2:
            raise ValueError(
                f"invalid data: expected a 2-D table of rows (got {data.ndim} dimension(s))"
            )
        table = []
        try:
            for r in data:
                if isinstance(r, (str, bytes)) or not hasattr(r, "__iter__"):
                    raise TypeError
                table.append([cell(v) for v in r])
        except TypeError:
            raise ValueError(
                "invalid data: expected a table file's path, a DataFrame or a 2-D table of "
                "rows (a sequence of rows, each a sequence of values)"
            ) from None
        note = "schema draft of rows (Python)"
    text = _native.draft_schema(
        path=path,
        rows=table,
        header=bool(header),
        epsilon=eps,
        delta=dlt,
        quantile=q,
        label=label,
        categorical=_names("categorical", categorical),
        ignore=_names("ignore", ignore),
        odometer=None if odometer is None else os.fspath(odometer),
        odometer_key=odometer_key,
        seed=None if seed is None else int(seed),
        note=note,
    )
    return json.loads(text)
