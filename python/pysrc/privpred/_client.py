"""A client for ``privpred serve``'s HTTP API (standard library only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ._native import BudgetExhausted


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
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

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
        X : array-like of shape (n_samples, n_features)
            Raw query rows.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Predicted classes (integers ``0..C-1``).
        budget_left : int or None
            Answers remaining of the budget B (None: unlimited, a privately trained model).

        Raises
        ------
        privpred.BudgetExhausted
            On HTTP 429: the request needs more answers than remain (nothing was spent).
        ValueError
            On other 4xx answers (wrong dimension, non-finite values, ...).
        PermissionError
            On 401 (missing or invalid token).
        RuntimeError
            On 5xx (e.g. the ledger cannot be written: the server fails closed).
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"invalid X: expected a 2-D array, got {X.ndim} dimensions")
        body = json.dumps({"inputs": X.tolist()}).encode()
        r = self._request("/v1/predict", body)
        labels = np.array([a["label"] for a in r["answers"]], dtype=np.int64)
        return labels, r.get("budget", {}).get("remaining")

    def model(self) -> Dict[str, Any]:
        """The model's description (method, guarantee, budget; no weights)."""
        return self._request("/v1/model")
