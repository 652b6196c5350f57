"""A client for ``privpred serve``'s HTTP API (standard library only)."""

from __future__ import annotations

import json
import math
import numbers
import os
import struct
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ._native import BudgetExhausted

_UNKNOWN = object()  # the served model's columns, before the first request reads them


class Client:
    """Client of a ``privpred serve`` instance.

    Parameters
    ----------
    url : str
        Base URL, e.g. ``http://127.0.0.1:8080``.
    token : str, optional
        Bearer token (servers started with ``--tokens``).
    timeout : float, default=30.0
        Seconds per request.
    classes : array-like, str or os.PathLike, optional
        The served model's class labels, so that :meth:`predict` returns them instead of
        the server's indices ``0..C-1``: the labels themselves (e.g. the estimator's
        ``classes_``), or the path of the served model file, whose stored labels are read
        (a file saved by Python stores them) after checking that the server serves that
        file's model. None: labels are the indices.
    """

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        timeout: float = 30.0,
        classes: Any = None,
    ):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.classes = classes
        self._labels: Optional[np.ndarray] = None
        self._served_columns: Any = _UNKNOWN

    def _request(self, path: str, body: Optional[bytes] = None) -> Dict[str, Any]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(
            self.url + path, data=body, headers=headers, method="POST" if body is not None else "GET"
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
                code, message = err.get("code", ""), err.get("message", "")
            except (ValueError, KeyError, TypeError):
                code, message = "", raw.decode("utf-8", "replace")
            if e.code == 429:
                raise BudgetExhausted(message) from None
            if e.code == 401:
                raise PermissionError(f"401 {code}: {message}") from None
            if 400 <= e.code < 500:
                raise ValueError(f"{e.code} {code}: {message}") from None
            raise RuntimeError(f"{e.code} {code}: {message}") from None

    def predict(self, X) -> Tuple[np.ndarray, Optional[int]]:
        """Answer raw query rows.

        The server preprocesses the rows exactly as at training time and charges one
        budget unit per new answer (repeated rows are answered from its store, free).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or DataFrame
            Raw query rows. For a model trained on a table through a schema, the table's
            cells: a DataFrame (read by column name: every column of the served model's
            query row, which ``model()["columns"]`` lists, must be present; others, the
            label included, are not sent), or rows in the schema's column order (with or
            without the label), numbers as numbers and categories as strings (None or NaN:
            a missing value, which the server refuses naming the column). For any other
            model, rows of numbers.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Predicted classes: the model's own labels when ``classes`` was given, else
            the indices ``0..C-1``.
        budget_left : int or None
            Answers remaining of the budget B (None: unlimited, a privately trained model).

        Raises
        ------
        privpred.BudgetExhausted
            On HTTP 429: the request needs more answers than remain (nothing was spent).
        ValueError
            For a row with a NaN or infinite number (naming the row and column, before
            anything is sent; for a table's model only an infinite one), a DataFrame that
            lacks one of a table model's columns (naming it), and on other 4xx answers
            (wrong dimension, unknown category, ...).
        PermissionError
            On 401 (missing or invalid token).
        RuntimeError
            On 5xx (e.g. the ledger cannot be written: the server fails closed).
        """
        columns = self._columns()
        if columns is None:
            inputs = _number_rows(X)
        else:
            inputs = _cell_rows(X, columns)
        labels_of = self._class_labels()
        body = json.dumps({"inputs": inputs}, allow_nan=False).encode()
        r = self._request("/v1/predict", body)
        labels = np.array([a["label"] for a in r["answers"]], dtype=np.int64)
        if labels_of is not None:
            labels = labels_of[labels]
        return labels, r.get("budget", {}).get("remaining")

    def _columns(self) -> Optional[List[Dict[str, str]]]:
        """The served model's query columns (read once): None for a model of numbers."""
        if self._served_columns is _UNKNOWN:
            self._served_columns = self.model().get("columns")
        return self._served_columns

    def _class_labels(self) -> Optional[np.ndarray]:
        """The labels of ``classes`` (read once), checked against the served model."""
        if self.classes is None:
            return None
        if self._labels is not None:
            return self._labels
        served = self.model()
        if isinstance(self.classes, (str, os.PathLike)):
            meta = _artifact_metadata(self.classes)
            if meta.get("ledger_id") is not None and meta["ledger_id"] != served.get("model_id"):
                raise ValueError(
                    f"invalid classes = {os.fspath(self.classes)!r}: the server at {self.url} "
                    f"serves model {served.get('model_id')}, not this file's "
                    f"{meta.get('ledger_id')}"
                )
            extra = json.loads(meta.get("extra", "null") or "null") or {}
            stored = (extra.get("python") or {}).get("classes")
            if stored is None:
                raise ValueError(
                    f"invalid classes = {os.fspath(self.classes)!r}: the file stores no class "
                    "labels (it was not saved by Python); give the labels themselves"
                )
            labels = np.asarray(stored)
        else:
            labels = np.asarray(self.classes)
        if labels.ndim != 1 or len(labels) != served.get("classes"):
            raise ValueError(
                f"invalid classes: {labels.shape} labels for a served model of "
                f"{served.get('classes')} classes"
            )
        self._labels = labels
        return labels

    def model(self) -> Dict[str, Any]:
        """Describe the served model.

        Returns
        -------
        dict
            The model's description (method, guarantee, budget; no weights).
        """
        return self._request("/v1/model")


def _number_rows(X) -> List[List[float]]:
    """Rows of numbers as JSON lists: every value a finite number (the first that is not is
    named with its row and column, before anything is sent)."""
    if hasattr(X, "toarray"):  # scipy.sparse
        X = X.toarray()
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"invalid X: expected a 2-D array, got {X.ndim} dimensions")
    bad = np.argwhere(~np.isfinite(X))
    if len(bad):
        i, j = (int(v) for v in bad[0])
        raise ValueError(
            f"invalid X: row {i} has a non-finite value ({X[i, j]}) in column {j}; every "
            "query value must be a finite number (nothing was sent)"
        )
    return X.tolist()


def _missing(v: Any) -> bool:
    """None, NaN and pandas' missing markers (NA, NaT)."""
    if v is None:
        return True
    if isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)):
        return math.isnan(float(v))
    return type(v).__name__ in ("NAType", "NaTType")


def _json_cell(v: Any, row: int, column: str) -> Any:
    """One table cell as the server reads it: a number, a string, or null (missing)."""
    if _missing(v):
        return None
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        if math.isinf(f):
            raise ValueError(
                f"invalid X: row {row} has an infinite value ({f}) in column {column}; a "
                "numeric cell must be a finite number (nothing was sent)"
            )
        return f
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="replace")
    return str(v)


def _cell_rows(X, columns: List[Dict[str, str]]) -> List[List[Any]]:
    """A table model's query rows: a DataFrame by column name (each of ``columns`` must be
    present), else rows of cells in the schema's column order, as JSON values."""
    names = [c["name"] for c in columns]
    if hasattr(X, "columns") and hasattr(X, "__getitem__"):
        have = {str(c) for c in X.columns}
        missing = [n for n in names if n not in have]
        if missing:
            shown = ", ".join(f"`{n}`" for n in missing[:10])
            raise ValueError(
                f"invalid X: the served model's column(s) {shown} are not among the "
                f"DataFrame's columns; its query rows hold {len(names)} columns: "
                + ", ".join(f"`{n}`" for n in names[:20])
                + (", ..." if len(names) > 20 else "")
                + " (nothing was sent)"
            )
        by_name = {str(c): c for c in X.columns}
        cols = [X[by_name[n]].tolist() for n in names]
        return [
            [_json_cell(v, i, f"`{names[j]}`") for j, v in enumerate(r)]
            for i, r in enumerate(zip(*cols))
        ]
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise ValueError(
                f"invalid X: expected a 2-D table of rows (got {X.ndim} dimension(s)); a "
                "single row is X[None, :]"
            )
        X = X.tolist()
    out = []
    for i, r in enumerate(X):
        if isinstance(r, (str, bytes)) or not hasattr(r, "__iter__"):
            raise ValueError(
                "invalid X: expected a 2-D table of rows (a sequence of rows, each a "
                "sequence of values); a single row is [row]"
            )
        out.append([_json_cell(v, i, str(j)) for j, v in enumerate(r)])
    return out


def _artifact_metadata(path) -> Dict[str, Any]:
    """The payload metadata of a model file stored in the clear, with the ledger id of its
    public header (format version 2: magic, version, header, payload, signature). A sealed
    file reveals only its header: its class labels must be given directly."""
    bad = ValueError(f"invalid classes = {os.fspath(path)!r}: not a privpred model file")
    with open(path, "rb") as f:
        if f.read(8) != b"PPMODEL\0":
            raise bad
        try:
            (_version, hlen) = struct.unpack("<II", f.read(8))
            if hlen > 1 << 20:
                raise bad
            header = json.loads(f.read(hlen))
            if header.get("sealed"):
                raise ValueError(
                    f"invalid classes = {os.fspath(path)!r}: the file is sealed (its class "
                    "labels are not readable without its sealing key); give the labels themselves"
                )
            (plen,) = struct.unpack("<Q", f.read(8))
            (n,) = struct.unpack("<Q", f.read(8))
            if n > min(plen, 100_000_000):
                raise bad
            meta = json.loads(f.read(n)).get("__metadata__", {})
        except (struct.error, ValueError) as e:
            if "sealed" in str(e):
                raise
            raise bad from None
    meta["ledger_id"] = header.get("ledger_id")
    return meta
