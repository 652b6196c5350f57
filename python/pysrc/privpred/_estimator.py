"""The scikit-learn estimator over the Rust core."""

from __future__ import annotations

import json
import numbers
import os
import tempfile
from typing import Any, Dict, Optional, Union

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data
except ImportError:  # older scikit-learn (e.g. beside diffprivlib 0.6, which needs < 1.6)

    def validate_data(est, X, y="no_validation", reset=True, **kw):
        return est._validate_data(X, y, reset=reset, **kw)


from . import _native

PRIVATE_TRAINING = ("model-sensitivity", "loss-perturbation", "dp-sgd")
BUDGETED = ("prediction-sensitivity", "subsample-aggregate")
METHODS = ("non-private",) + PRIVATE_TRAINING + BUDGETED


def _canonical(method: str) -> str:
    return "subsample-aggregate" if method == "subsample-and-aggregate" else method


def _spends_budget(est: "PrivateLogisticRegression") -> bool:
    """Whether the estimator's answers spend a budget: the fitted model's own kind (never the
    user-settable ``method`` parameter, which ``set_params`` can change after the fit); the
    parameter only before a fit, when there is nothing to release."""
    native = est.__dict__.get("_native")
    if native is not None:
        return bool(json.loads(native.info_json())["spends_budget"])
    return _canonical(est.method) in BUDGETED


def _releases_scores(est: "PrivateLogisticRegression") -> bool:
    return not _spends_budget(est)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class PrivateLogisticRegression(ClassifierMixin, BaseEstimator):
    """Differentially private multinomial logistic regression.

    One of the five private-prediction methods of van der Maaten & Hannun (2020) for
    linear models, trained by the privpred Rust core exactly as ``privpred train`` trains
    it (same preprocessing, cross-validation, calibration and noise).

    Every row is mapped into the unit ball before training and prediction by the CLI's
    preprocessing with scale 1: the ``normalize`` rule (x / ||x||, data-independent; the
    CLI's default) unless ``unit_ball`` says otherwise, then the optional bias feature.
    The guarantee assumes ||x|| <= 1 and this mapping ensures it.

    Parameters
    ----------
    method : str, default="model-sensitivity"
        Private training (the released model is private, answers are free):
        ``model-sensitivity`` (output perturbation), ``loss-perturbation`` (objective
        perturbation), ``dp-sgd`` (needs delta > 0). Private prediction (every answer
        spends the inference budget B): ``prediction-sensitivity``,
        ``subsample-aggregate``. ``non-private``: the reference model, no guarantee.
    epsilon : float, default=1.0
        Privacy loss epsilon > 0.
    delta : float, default=0.0
        Failure probability delta in [0, 1).
    budget : int, optional
        Inference budget B >= 1: the number of answers the guarantee covers (required by
        private-prediction methods; ignored by the others).
    lam : float or "cv", default="cv"
        L2 strength lambda > 0, or ``"cv"``: chosen on a 10 % hold-out over the grid of
        SPEC section 6 (the selection's privacy cost is not accounted, as in the paper and
        the CLI). Subsample-and-aggregate: the teachers' lambda (default 0).
    neighbours : {"replace-one", "add-remove"}, default="replace-one"
        The neighbouring relation of the guarantee.
    calibration : {"corrected", "tight", "paper"}, default="corrected"
        Which analysis sets the noise (``paper`` reproduces the published rules, which
        do not always deliver the guarantee).
    bias : float, bool or None, default=None
        The bias feature's value v in [0, 1), as the CLI's ``--bias V``: rows become
        [x * sqrt(1 - v**2), v], so they stay in the unit ball. None, False or 0: no bias
        feature (the default, as for ``privpred train``). True: v = sqrt(1/2), the value
        before it became a parameter (kept for compatibility). The study and ``privpred
        compare`` default to 0.05, chosen by measurement on the training hold-out.
    random_state : int, RandomState or None, default=None
        None: the noise comes from an OS-seeded generator (a private release). Given: the
        run is a reproducible experiment, recorded as such; its noise can be regenerated
        from the seed, so ``privpred serve`` and ``privpred predict`` refuse the saved
        model.
    unit_ball : str, default="normalize"
        The unit-ball rule: ``normalize``, ``clip:R`` or ``max-norm`` (a statistic of
        the private data, not accounted).
    teachers : int, optional
        Subsample-and-aggregate: number of teachers T (default 256).
    clip : float or "cv", default="cv"
        DP-SGD: the clip norm nu, or ``"cv"``.
    batch_size, epochs, learning_rate : optional
        DP-SGD's expected batch size (256), epochs (20) and learning rate (1).
    binary : "auto", True or False, default=False
        Two-class problems as one sigmoid (logistic) output instead of a two-class
        softmax: the loss's constants are K = 1 and L = 1/4 instead of sqrt(2) and 1/2, so
        the same guarantee needs less noise. ``"auto"``: the sigmoid model whenever the
        labels have two classes and the method is model sensitivity or prediction
        sensitivity (the methods that train it); True requires it (a ValueError
        otherwise); False keeps the softmax. With Gaussian noise (delta > 0) both models
        give the same predictions once lambda is chosen for each; with delta = 0 the sigmoid
        model needs less noise. ``guarantee_["assumptions"]["loss"]`` says which was used.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    n_features_in_ : int
        Number of raw features.
    guarantee_ : dict or None
        The guarantee, identical in content to ``privpred calibrate --json``; None for
        the non-private model.
    release_ : str
        ``private-release``, ``experiment`` (seeded) or ``non-private``.
    lambda_ : float or None
        The lambda used (cross-validated or given).
    theta_ : ndarray of shape (n_features_out, n_classes) or None
        The weights after preprocessing, for models whose weights are public (private
        training, non-private); None for private-prediction methods (secret).
    cross_validation_ : dict or None
        The hold-out scores of the lambda selection of the non-private model (None for
        private methods: their scores are statistics of the private data, see
        ``private_diagnostics_``).
    private_diagnostics_ : dict or None
        What training measured on the private data without noise (the certificate's
        gradient norm, DP-SGD's clipped fraction, the hold-out scores of the lambda or
        clip selection): private to the data owner. Not saved, not pickled; None for a
        loaded or unpickled model.

    Notes
    -----
    Private-prediction methods answer ``predict`` with fresh noise each time and charge
    one budget unit per row to an in-memory ledger; past B they raise
    :class:`privpred.BudgetExhausted`. A model loaded from a file answers such queries only
    through ``privpred serve`` and its durable ledger.
    """

    def __init__(
        self,
        method: str = "model-sensitivity",
        epsilon: float = 1.0,
        delta: float = 0.0,
        budget: Optional[int] = None,
        lam: Any = "cv",
        neighbours: str = "replace-one",
        calibration: str = "corrected",
        bias: Union[float, bool, None] = None,
        random_state: Any = None,
        unit_ball: str = "normalize",
        teachers: Optional[int] = None,
        clip: Any = "cv",
        batch_size: Optional[int] = None,
        epochs: Optional[float] = None,
        learning_rate: Optional[float] = None,
        binary: Union[bool, str] = False,
    ):
        self.method = method
        self.epsilon = epsilon
        self.delta = delta
        self.budget = budget
        self.lam = lam
        self.neighbours = neighbours
        self.calibration = calibration
        self.bias = bias
        self.random_state = random_state
        self.unit_ball = unit_ball
        self.teachers = teachers
        self.clip = clip
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.binary = binary

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if _canonical(self.method) in BUDGETED:
            tags.non_deterministic = True
        return tags

    # ---- fitting ---------------------------------------------------------------------
    def _seed(self) -> Optional[int]:
        if self.random_state is None:
            return None
        if isinstance(self.random_state, (int, np.integer)) and not isinstance(
            self.random_state, bool
        ):
            if self.random_state < 0:
                raise ValueError(
                    f"invalid random_state = {self.random_state}: must be an integer >= 0, a RandomState or None"
                )
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(0, 2**63 - 1, dtype=np.int64))

    @staticmethod
    def _value_or_cv(name: str, v: Any) -> Optional[float]:
        if isinstance(v, str):
            if v == "cv":
                return None
            raise ValueError(f"invalid {name} = {v}: must be a finite number > 0 or `cv`")
        return float(v)

    def _loss(self, method: str, n_classes: int) -> str:
        """The output layer for ``binary`` (see the class docstring)."""
        sigmoid_methods = ("model-sensitivity", "prediction-sensitivity")
        b = self.binary
        if isinstance(b, str) and b == "auto":
            return "logistic" if n_classes == 2 and method in sigmoid_methods else "softmax"
        if b is True or (isinstance(b, np.bool_) and bool(b)):
            if n_classes != 2 or method not in sigmoid_methods:
                raise ValueError(
                    f"invalid binary = True for {n_classes} classes and method = {method}: the sigmoid model needs two classes and method model-sensitivity or prediction-sensitivity"
                )
            return "logistic"
        if b is False or (isinstance(b, np.bool_) and not bool(b)):
            return "softmax"
        raise ValueError(f"invalid binary = {b!r}: must be 'auto', True or False")

    def fit(self, X, y):
        """Train the private model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Raw features (mapped into the unit ball as described in the class docstring).
        y : array-like of shape (n_samples,)
            Class labels (at least two classes).

        Returns
        -------
        self : PrivateLogisticRegression
            The fitted estimator.

        Raises
        ------
        ValueError
            For bad arguments or data; the message is the Rust core's.
        """
        method = _canonical(self.method)
        if method not in METHODS:
            raise ValueError(f"invalid method = {self.method}: expected one of {', '.join(METHODS)}")
        X, y = validate_data(self, X, y, dtype=np.float32, order="C")
        check_classification_targets(y)
        classes, y_enc = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"invalid classes = {len(classes)}: the training labels must contain at least 2 classes (got {len(classes)} class)"
            )
        bias = _bias_value(self.bias)
        loss = self._loss(method, len(classes))
        try:
            extra = json.dumps({"classes": classes.tolist()})
        except TypeError:
            extra = None
        native = _native.train(
            X,
            np.ascontiguousarray(y_enc, dtype=np.uint32),
            len(classes),
            method,
            epsilon=None if method == "non-private" else float(self.epsilon),
            delta=float(self.delta),
            budget=None if self.budget is None else int(self.budget),
            lam=self._value_or_cv("lam", self.lam),
            calibration=self.calibration,
            neighbours=self.neighbours,
            bias=bias,
            unit_ball=self.unit_ball,
            seed=self._seed(),
            teachers=self.teachers,
            clip=self._value_or_cv("clip", self.clip),
            batch_size=self.batch_size,
            epochs=None if self.epochs is None else float(self.epochs),
            learning_rate=None if self.learning_rate is None else float(self.learning_rate),
            extra=extra,
            loss=loss,
        )
        self.classes_ = classes
        self._set_native(native)
        return self

    def _set_native(self, native) -> None:
        self._native = native
        self.__dict__.pop("_saved_to", None)  # a new fit is a new model, not the saved one
        g = native.guarantee_json()
        self.guarantee_ = None if g is None else json.loads(g)
        info = json.loads(native.info_json())
        self.info_ = info
        self.release_ = info["release"]
        self.cross_validation_ = (info.get("extra") or {}).get("cross_validation")
        self.private_diagnostics_ = json.loads(native.private_diagnostics_json())
        self.lambda_ = info["lambda"]
        if self.lambda_ is None and info["method"] == "non-private":
            cv = self.cross_validation_ or {}
            self.lambda_ = cv.get("chosen") if cv.get("parameter") == "lambda" else (
                None if isinstance(self.lam, str) else float(self.lam))
        self.theta_ = native.coef()

    # ---- prediction ------------------------------------------------------------------
    def _queries(self, X) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=np.float32, order="C")

    def predict(self, X):
        """Predict class labels.

        For private-prediction methods every row is one fresh draw of the mechanism and
        spends one unit of the inference budget (all rows or none).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Raw query rows.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels.

        Raises
        ------
        privpred.BudgetExhausted
            When the batch needs more answers than remain of the budget B.
        """
        saved = self.__dict__.get("_saved_to")
        if saved is not None:
            raise RuntimeError(
                f"this private-prediction model was saved to {saved} and answers only through that "
                f"file's budget ledger: privpred.load({saved!r}, ledger=...) or `privpred serve`"
            )
        X = self._queries(X)
        labels, _ = self._native.predict(X)
        return self.classes_[labels]

    @available_if(_releases_scores)
    def decision_function(self, X):
        """Logits theta^T x (binary: the difference of the two), for public models.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Raw query rows.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            Scores.
        """
        X = self._queries(X)
        z = self._native.logits_of(X)
        return z[:, 1] - z[:, 0] if z.shape[1] == 2 else z

    @available_if(_releases_scores)
    def predict_proba(self, X):
        """Softmax probabilities of a public (privately trained or non-private) model.

        Private-prediction methods release labels only and have no ``predict_proba``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Raw query rows.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Probabilities.
        """
        X = self._queries(X)
        return _softmax(self._native.logits_of(X))

    @available_if(_releases_scores)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Raw query rows.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Log-probabilities.
        """
        X = self._queries(X)
        z = self._native.logits_of(X)
        z = z - z.max(axis=1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=1, keepdims=True))

    @property
    def budget_left_(self) -> Optional[int]:
        """Answers left of the budget B (None: unlimited), from the durable ledger when the
        model answers through one (``save(..., ledger=...)``, ``load(..., ledger=...)``),
        else from the in-memory ledger."""
        check_is_fitted(self)
        total, spent = self._native.budget_state()
        return None if total is None else total - spent

    # ---- artifacts -------------------------------------------------------------------
    def save(self, path, ledger=None) -> None:
        """Write the model as a privpred safetensors artifact.

        The file is the one ``privpred train`` writes: ``privpred serve``, ``predict``,
        ``evaluate`` and :func:`privpred.load` read it. Seeded models (``random_state``
        given) are saved as experiments, which ``serve`` and ``predict`` refuse.

        Parameters
        ----------
        path : str or os.PathLike
            Output file (written atomically).
        ledger : str or os.PathLike, optional
            Private-prediction methods: a durable SQLite budget ledger (a path or
            ``sqlite:PATH``), the same file ``privpred serve --ledger`` uses. The saved
            file's budget record (total B, keyed by the file's SHA-256) is created in it —
            refused if it exists, a budget is never reset — and from then on this
            estimator answers through it: every answer is recorded durably before it is
            returned, so other processes, a restarted session (:func:`privpred.load` with
            the same ledger) and ``privpred serve`` share the one budget B.

        Raises
        ------
        RuntimeError
            For a private-prediction model that already answered queries from the
            in-memory ledger (a server would start a fresh ledger with the whole budget),
            or a ledger that cannot be created or written.
        ValueError
            For a ledger on a model whose answers spend no budget, or a second ledger.
        """
        check_is_fitted(self)
        self._native.save(os.fspath(path), None if ledger is None else os.fspath(ledger))
        if ledger is None and _spends_budget(self):
            # the saved file now carries this model's identity and budget: answering from the
            # in-memory ledger as well would give a second budget (answers here, then B more
            # through the file's ledger)
            self._saved_to = os.fspath(path)

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        # measured on the private data without noise: never leaves the process in a pickle
        state.pop("private_diagnostics_", None)
        native = state.pop("_native", None)
        if native is not None:
            if bool(json.loads(native.info_json())["spends_budget"]):
                raise TypeError(
                    "a private-prediction model cannot be pickled: the copy would carry its secret parameters with a fresh budget; use save() before any answer and `privpred serve`"
                )
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "model.safetensors")
                native.save(p)
                with open(p, "rb") as f:
                    state["_artifact"] = f.read()
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        blob = state.pop("_artifact", None)
        self.__dict__.update(state)
        self.private_diagnostics_ = None
        if blob is not None:
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "model.safetensors")
                with open(p, "wb") as f:
                    f.write(blob)
                self._native = _native.load(p)


def _bias_value(bias) -> float:
    """The bias feature's value from the ``bias`` parameter (see the class docstring)."""
    if bias is None or bias is False:
        return 0.0
    if bias is True:
        return 0.7071067811865476  # sqrt(1/2), the value before it became a parameter
    if isinstance(bias, numbers.Real) and not isinstance(bias, (bool, np.bool_)):
        # the range [0, 1) is checked by the core (privpred_data::preprocess::check_bias)
        return float(bias)
    raise ValueError(
        f"invalid bias = {bias!r}: must be a number in [0, 1) (the bias feature's value v, rows [x*sqrt(1 - v**2), v]; 0 = no bias feature), True (sqrt(1/2)), False or None"
    )


def load(path, ledger=None, init_ledger: bool = False) -> PrivateLogisticRegression:
    """Load a privpred linear-model artifact (from ``privpred train`` or ``save``).

    Parameters
    ----------
    path : str or os.PathLike
        The safetensors file.
    ledger : str or os.PathLike, optional
        Private-prediction methods: answer through this durable SQLite budget ledger (a
        path or ``sqlite:PATH``), the one ``privpred serve --ledger`` uses for the same
        file. Without it such a model refuses ``predict`` (its budget may be spent
        elsewhere).
    init_ledger : bool, default=False
        Create the ledger file and the model's record (total B); refused if the record
        exists. Without it a missing ledger or record is an error, as for ``privpred serve``.

    Returns
    -------
    PrivateLogisticRegression
        A fitted estimator. Its ``classes_`` are those saved by Python, else
        ``0..C-1``. A private-prediction model loaded without ``ledger`` refuses
        ``predict`` (give the ledger, or serve it with ``privpred serve``).

    Raises
    ------
    ValueError
        For a file that is not a valid privpred model (corrupt, wrong format or version).
    OSError
        For a file that cannot be read.
    """
    native = _native.load(
        os.fspath(path), None if ledger is None else os.fspath(ledger), bool(init_ledger)
    )
    info = json.loads(native.info_json())
    g = native.guarantee_json()
    guarantee = None if g is None else json.loads(g)
    params: Dict[str, Any] = {"method": info["method"]}
    if guarantee is not None:
        params.update(
            epsilon=guarantee["epsilon"],
            delta=guarantee["delta"],
            budget=guarantee["budget"],
            neighbours=guarantee["neighbours"],
            calibration=guarantee["calibration"],
        )
    seed = (info.get("seed_policy") or {}).get("seed")
    if seed is not None:
        params["random_state"] = seed
    if info.get("lambda") is not None:
        params["lam"] = info["lambda"]
    est = PrivateLogisticRegression(**params)
    py_extra = (info.get("extra") or {}).get("python") or {}
    classes = py_extra.get("classes")
    est.classes_ = np.asarray(classes) if classes is not None else np.arange(info["classes"])
    est.n_features_in_ = info["input_dim"]
    est._set_native(native)
    return est
