"""The scikit-learn estimator over the Rust core."""

from __future__ import annotations

import json
import numbers
import os
import sys
import tempfile
import time
from numbers import Integral, Real
from typing import Any, Dict, Optional, Union

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data
except ImportError:  # older scikit-learn (e.g. beside diffprivlib 0.6, which needs < 1.6)

    def validate_data(est, X, y="no_validation", reset=True, **kw):
        return est._validate_data(X, y, reset=reset, **kw)


from . import _native, _schema
from ._privacy import search_context, warn_fit_context
from ._summary import summary as _summary

PRIVATE_TRAINING = ("model-sensitivity", "loss-perturbation", "dp-sgd")
BUDGETED = ("prediction-sensitivity", "subsample-aggregate")
METHODS = ("non-private",) + PRIVATE_TRAINING + BUDGETED

# What a fit without a schema and without a unit-ball rule is told: a table needs a schema,
# image-like rows the explicit per-row map (as on the command line, where a table without a
# schema is refused and image data sets are normalised per example).
NEEDS_SCHEMA = (
    "invalid X without schema= or unit_ball=: a table's rows are mapped into the unit ball "
    "through a schema of public facts about its columns: give schema= (a schema file or the "
    "same JSON as a dict, declaring the label's classes, each numeric column's public bounds "
    "and each categorical column's public categories; format in docs/tables.md; `privpred data "
    "schema FILE` drafts one). For image-like rows (pixel intensities and other features on one "
    "common scale) give unit_ball=\"normalize\": each row is scaled to unit length, x/||x||, "
    "as the command line does for image data sets (unit_ball=\"clip:R\": x/max(R, ||x||))"
)

# The largest count the core takes (a 64-bit integer): beyond it a count is refused by
# scikit-learn's parameter validation, naming the parameter, not by a conversion overflow.
MAX_COUNT = 2**63 - 1

# The most training threads ``n_jobs`` may ask for (each is an OS thread with its own stack).
MAX_THREADS = 1024

# The bias feature's value v when ``fit_intercept=True`` and ``bias`` is not given (see the
# class docstring for the measurement behind ``fit_intercept``'s default).
INTERCEPT_BIAS = 0.05


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

    Every row is mapped into the unit ball before training and prediction; the guarantee
    assumes ||x|| <= 1 and this mapping ensures it, from public facts only. A table's raw
    rows go through its ``schema`` (public bounds and categories) exactly as ``privpred
    train --schema`` maps them. Without a schema the rows are taken as image-like (features
    on one common scale, such as pixel intensities) only when ``unit_ball`` says how to map
    them (``"normalize"``: x / ||x||, what the CLI does for image data sets); a fit with
    neither raises ValueError naming both, as the CLI refuses a table without a schema.
    The optional bias feature comes last.

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
        private-prediction methods; given with any other method, whose answers spend
        nothing, it raises ValueError).
    lam : float, "private", "cv" or None, default=None
        L2 strength lambda > 0, chosen without the data (costs nothing). None: for private
        methods the public rule from N, d, C, epsilon and B (docs/tables.md; costs nothing,
        recorded as ``public-rule``; N-hat = ``public_n`` in place of N under add-remove
        neighbours), a selection on a hold-out for ``non-private``.
        ``"private"``: the private selection over the grid {1e-5, ..., 0.5}, inside the
        guarantee (the model is trained on the 80 % of the data the selection does not use).
        ``"cv"``: the paper's selection on a 10 % hold-out without privacy; the guarantee is
        then marked not valid. ``guarantee_["selection"]`` says which and what it cost.
        Subsample-and-aggregate: the teachers' lambda (default 0). DP-SGD trains without
        L2 regularisation: ``lam`` given with it raises ValueError (its knob is ``clip``).
    neighbours : {"replace-one", "add-remove"}, default="replace-one"
        The neighbouring relation of the guarantee.
    calibration : {"corrected", "tight", "paper"}, default="corrected"
        Which analysis sets the noise (``paper`` reproduces the published rules, which
        do not always deliver the guarantee).
    bias : float, True or None, default=None
        The bias feature's value v in (0, 1) when ``fit_intercept`` is True (None: 0.05;
        True: sqrt(1/2)). Given with ``fit_intercept=False`` it is an error.
    random_state : int, RandomState or None, default=None
        None: the noise comes from an OS-seeded generator (a private release). Given: the
        run is a reproducible experiment, recorded as such; its noise can be regenerated
        from the seed, so ``privpred serve`` and ``privpred predict`` refuse the saved
        model.
    unit_ball : str or None, default=None
        The unit-ball rule: ``normalize`` (x / ||x||: image-like rows), ``clip:R``
        (x / max(R, ||x||)) or, for the non-private model only, ``max-norm`` (a statistic of
        the data). None: ``clip:1`` with a ``schema`` (its rows are already inside the unit
        ball; the CLI's default); without a schema None is refused with a ValueError naming
        ``schema`` and ``unit_ball="normalize"`` (rows are never rescaled unless asked).
    teachers : int, optional
        Subsample-and-aggregate: number of teachers T in 1..=N (default: the public rule
        clamp(N // 6, 1, 256) of the public size: the N training rows, or ``public_n``
        under add-remove neighbours). Given with any other method it raises ValueError.
    clip : float, "private", "cv" or None, default=None
        DP-SGD: the clip norm nu > 0 (None: the public rule's 1), or a selection as for
        ``lam`` (``clip="private"``, ``clip="cv"``). Given with any other method it raises
        ValueError naming ``clip`` (the other methods bound each example by the unit ball).
    batch_size, epochs, learning_rate : optional
        DP-SGD's expected batch size in 1..=N (the public rule clamp(floor(sqrt(N)), 1,
        256) of the public size: N, or ``public_n`` under add-remove), epochs in (0, 10000]
        (20) and learning rate > 0 (1). Given with any other method they raise ValueError.
    odometer : str or os.PathLike, optional
        The data owner's privacy odometer (an SQLite path or a postgres:// URL, set up with
        :func:`privpred.odometer.set_limit`). Every ``fit`` is charged its whole guarantee
        (for budgeted methods: of all B answers) against the dataset's limit before any
        training, and raises ``ValueError`` without training when it would pass the limit
        (see :mod:`privpred.odometer`).
    odometer_key : str, optional
        The dataset's key in the odometer (default: the key a privately drafted ``schema``
        was charged to, its ``drafted["odometer_key"]``, else
        :func:`privpred.odometer.dataset_key` of the training data).
    fit_intercept : bool, default=False
        Learn an intercept: a constant bias feature of value v (``bias``) is appended to
        every row, [x * sqrt(1 - v**2), v], so rows stay in the unit ball and the guarantee
        is unchanged; its weight times v is ``intercept_``. The default is
        False (scikit-learn's is True) by measurement on 10 % training hold-outs
        (``benchmarks/fit_intercept.py``, 10 private fits per cell; model sensitivity,
        loss perturbation and DP-SGD on digits, model sensitivity and loss perturbation on
        MNIST, at epsilon 1 and 10): the intercept cost 1.1 points of accuracy on average
        over the 10 cells, losing up to 5.9 points on digits (1,131 training rows) and
        gaining 0.0 to 3.2 points on MNIST (54,000 rows). Large data sets may gain from it.
    class_weight : None
        Only None (every example weighs 1). Per-class weights multiply an example's loss
        and so its gradient: the calibrations of every method bound one example's influence
        with weight 1, and ``"balanced"`` weights are computed from the private label counts
        themselves; both are refused with a ValueError rather than silently weakening the
        guarantee.
    verbose : int, default=0
        0: silent; 1 or more: one line when a fit starts and one with its time and
        guarantee when it ends (public facts only).
    n_jobs : int or None, default=None
        Threads used by training, at most 1024 (None: all cores; -1: all cores; -2: all
        but one).
    binary : "auto", True or False, default="auto"
        Two-class problems as one sigmoid (logistic) output instead of a two-class
        softmax: the loss's constants are K = 1 and L = 1/4 instead of sqrt(2) and 1/2, so
        the same guarantee needs less noise. ``"auto"``: the sigmoid model whenever the
        labels have two classes and the method is model sensitivity, prediction
        sensitivity, loss perturbation or DP-SGD (the methods that train it; DP-SGD's
        per-example gradient norm is then at most ||x|| instead of sqrt(2) ||x||); True
        requires it (a ValueError otherwise); False keeps the softmax. The default is
        "auto" because, measured against the two-class softmax at equal epsilon (breast
        cancer and MNIST 0-4 vs 5-9, 10 repetitions, docs/binary.md), the sigmoid model
        was as accurate or more accurate for model sensitivity and loss perturbation. With Gaussian noise (delta > 0)
        model and prediction sensitivity give the same predictions with either model once
        lambda is chosen for each; with delta = 0, and for loss perturbation (whose rho is
        four times smaller), the sigmoid model needs less noise.
        ``guarantee_["assumptions"]["loss"]`` says which was used.
    schema : str, os.PathLike, dict or None, default=None
        A table's schema (the JSON file of ``privpred train --schema``, or the same JSON as
        a dict; format in docs/tables.md): the label's classes, each numeric column's public
        bounds and each categorical column's public categories. ``X`` then holds raw rows —
        numbers and category strings, e.g. a DataFrame (columns matched by name) or an
        object array in the schema's column order, with or without the label column — and
        ``y`` the label values the schema declares. Rows are mapped into the unit ball from
        the schema alone (no statistic of the data), the schema is saved with the model
        (``predict``, ``privpred serve`` and :func:`privpred.load` map raw queries the same
        way), and ``classes_`` are the schema's classes. A row that does not match (an
        unknown category or label, a value outside bounds declared ``refuse``, a missing or
        non-numeric value, the wrong number of columns) raises ValueError naming the row
        and the column.
    classes : array-like, "observed" or None, default=None
        The class labels, a public parameter (the model's outputs, released with it): label
        i of the model is ``classes[i]``, and a training label outside them raises
        ValueError (it is not dropped). None: the schema's classes with a ``schema``;
        without one a private method raises ValueError naming ``classes`` (read from ``y``,
        the set of labels present would be a statistic of the private data, and one rare
        label would appear in the saved model), while the non-private model reads them from
        ``y``. ``"observed"``: the labels present in ``y``, which the caller thereby
        declares public (recorded with the model and in ``guarantee_["summary"]``).
    public_n : int or None, default=None
        Under ``neighbours="add-remove"`` (loss perturbation, DP-SGD): the public
        training-set size N-hat the calibration uses in place of the exact N, which that
        relation makes private (DP-SGD's sampling rate q = batch_size / N-hat and its steps,
        loss perturbation's floor N-hat * lam on its regulariser); the guarantee records
        N-hat and nothing saved depends on the exact N. Required under add-remove, refused
        under replace-one.
    public_search : bool, default=False
        Fitted several times on the same data by a scikit-learn search or cross-validation
        (``GridSearchCV``, ``cross_val_score``, ...), each fit's model records its selection as
        ``external-search`` and ``valid_guarantee: false`` with the reason (in ``guarantee_``,
        the saved file, ``privpred serve``), since what the search keeps was chosen on the
        private data outside the guarantee. True states that the search runs on public data
        (e.g. a public proxy of the private table), so nothing is marked.
    allow_seeded : bool, default=False
        Private-prediction methods with ``random_state``: answer anyway. Refused without it,
        as ``privpred predict`` and ``serve`` refuse seeded models: the answers' noise can be
        regenerated from the seed and subtracted, so they are an experiment's, not a private
        release (``info_["experiment_seed"]`` then names the seed).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    n_features_in_ : int
        Number of raw features.
    guarantee_ : dict or None
        The guarantee: the fields of ``privpred calibrate --json`` (method, epsilon, delta,
        neighbours, budget, noise, assumptions, ...) and ``summary``, one plain-language
        sentence saying what is protected, against whom, for how many answers and what is
        not covered. None for the non-private model.
    release_ : str
        ``private-release``, ``experiment`` (seeded) or ``non-private``.
    lambda_ : float or None
        The lambda used (cross-validated or given).
    theta_ : ndarray of shape (n_features_out, n_classes) or None
        The weights after preprocessing, for models whose weights are public (private
        training, non-private); None for private-prediction methods (secret).
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        scikit-learn's layout of a public model over the unit-ball-mapped rows
        u = x / ||x|| (``normalize``; x / max(R, ||x||) for ``clip:R``):
        ``decision_function(X) == u(X) @ coef_.T + intercept_`` up to float32 rounding of
        the rows. Two classes: one row, the second class's weights minus the first's.
        Absent for private-prediction methods (secret parameters).
    intercept_ : ndarray of shape (1,) or (n_classes,)
        The bias feature's weights times its value (zeros without ``fit_intercept``).
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
        lam: Any = None,
        neighbours: str = "replace-one",
        calibration: str = "corrected",
        bias: Union[float, bool, None] = None,
        random_state: Any = None,
        unit_ball: Optional[str] = None,
        teachers: Optional[int] = None,
        clip: Any = None,
        batch_size: Optional[int] = None,
        epochs: Optional[float] = None,
        learning_rate: Optional[float] = None,
        odometer: Any = None,
        odometer_key: Optional[str] = None,
        fit_intercept: bool = False,
        class_weight: Any = None,
        verbose: int = 0,
        n_jobs: Optional[int] = None,
        binary: Union[bool, str] = "auto",
        schema: Any = None,
        classes: Any = None,
        public_n: Optional[int] = None,
        public_search: bool = False,
        allow_seeded: bool = False,
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
        self.odometer = odometer
        self.odometer_key = odometer_key
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.binary = binary
        self.schema = schema
        self.classes = classes
        self.public_n = public_n
        self.public_search = public_search
        self.allow_seeded = allow_seeded

    # scikit-learn's parameter validation (types and ranges; messages name the parameter);
    # the core checks what depends on several parameters
    _parameter_constraints: dict = {
        "method": [StrOptions(set(METHODS) | {"subsample-and-aggregate"})],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="left")],
        "budget": [Interval(Integral, 1, MAX_COUNT, closed="both"), None],
        "lam": [Interval(Real, 0, None, closed="left"), StrOptions({"private", "cv"}), None],
        "neighbours": [StrOptions({"replace-one", "add-remove"})],
        "calibration": [StrOptions({"corrected", "tight", "paper"})],
        "bias": [Interval(Real, 0, 1, closed="neither"), "boolean", None],
        "random_state": ["random_state"],
        "unit_ball": [str, None],
        "teachers": [Interval(Integral, 1, MAX_COUNT, closed="both"), None],
        "clip": [Interval(Real, 0, None, closed="neither"), StrOptions({"private", "cv"}), None],
        "batch_size": [Interval(Integral, 1, MAX_COUNT, closed="both"), None],
        "epochs": [Interval(Real, 0, None, closed="neither"), None],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), None],
        "fit_intercept": ["boolean"],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "verbose": ["verbose"],
        "n_jobs": [Integral, None],
        "odometer": [str, os.PathLike, None],
        "odometer_key": [str, None],
        "binary": ["boolean", StrOptions({"auto"})],
        "schema": [str, os.PathLike, dict, None],
        "classes": ["array-like", StrOptions({"observed"}), None],
        "public_n": [Interval(Integral, 1, MAX_COUNT, closed="both"), None],
        "public_search": ["boolean"],
        "allow_seeded": ["boolean"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR, densified for the core
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
        if v is None:
            return None
        if isinstance(v, str):
            if v in ("cv", "private"):
                return None
            raise ValueError(
                f"invalid {name} = {v}: must be a finite number > 0, 'private', 'cv' or None"
            )
        return float(v)

    def _select(self) -> Optional[str]:
        """How an unset lambda or clip is selected: None (public default), 'private' or 'cv'."""
        picks = {v for v in (self.lam, self.clip) if v in ("private", "cv")}
        if len(picks) > 1:
            raise ValueError("invalid lam/clip: 'private' and 'cv' cannot be mixed")
        return picks.pop() if picks else None
    def _loss(self, method: str, n_classes: int) -> str:
        """The output layer for ``binary`` (see the class docstring)."""
        sigmoid_methods = (
            "model-sensitivity", "prediction-sensitivity", "loss-perturbation", "dp-sgd"
        )
        b = self.binary
        if isinstance(b, str) and b == "auto":
            return "logistic" if n_classes == 2 and method in sigmoid_methods else "softmax"
        if b is True or (isinstance(b, np.bool_) and bool(b)):
            if n_classes != 2 or method not in sigmoid_methods:
                raise ValueError(
                    f"invalid binary = True for {n_classes} classes and method = {method}: the sigmoid model needs two classes and method model-sensitivity, prediction-sensitivity, loss-perturbation or dp-sgd"
                )
            return "logistic"
        if b is False or (isinstance(b, np.bool_) and not bool(b)):
            return "softmax"
        raise ValueError(f"invalid binary = {b!r}: must be 'auto', True or False")

    def fit(self, X, y):
        """Train the private model.

        One fit is one release: fitted inside a scikit-learn search or cross-validation,
        or after preprocessing fitted on the same data, it warns with
        :class:`privpred.PrivacyLeakWarning` (the guarantee covers this fit alone).

        Parameters
        ----------
        X : {array-like, scipy.sparse CSR matrix} of shape (n_samples, n_features)
            Raw features (mapped into the unit ball as described in the class docstring).
            A sparse matrix is densified for the core (n_samples * n_features * 4 bytes).
        y : array-like of shape (n_samples,)
            Class labels (at least two classes).

        Returns
        -------
        PrivateLogisticRegression
            The fitted estimator (self).

        Raises
        ------
        ValueError
            For bad arguments or data; parameter types and ranges as scikit-learn's
            parameter validation reports them, the rest with the Rust core's message.
        """
        self._validate_params()
        method = _canonical(self.method)
        self._check_knobs(method)
        if self.schema is None and self.unit_ball is None:
            raise ValueError(NEEDS_SCHEMA)
        if self.class_weight is not None:
            raise ValueError(
                f"invalid class_weight = {self.class_weight!r}: only None is supported. A class "
                "weight w multiplies an example's loss and gradient, while every method's noise "
                "is calibrated for one example of weight 1 (the guarantee would fail for w > 1), "
                "and 'balanced' weights are computed from the private label counts; resample "
                "or relabel with public information instead"
            )
        if self.schema is not None:
            X, y_enc, classes, schema_text = self._table(X, y)
        else:
            schema_text = None
            X, y = validate_data(self, X, y, dtype=np.float32, order="C", accept_sparse="csr")
            if sp.issparse(X):
                X = np.ascontiguousarray(X.toarray(), dtype=np.float32)
            check_classification_targets(y)
            classes, y_enc = self._classes(y, method)
        if len(classes) < 2:
            raise ValueError(
                f"invalid classes = {len(classes)}: the training labels must contain at least 2 classes (got {len(classes)} class)"
            )
        bias = _bias_value(self.bias, self.fit_intercept)
        leaks = [] if method == "non-private" else warn_fit_context(self, X)
        started = time.perf_counter()
        if self.verbose:
            print(
                f"[privpred] fitting {method} on {X.shape[0]} rows x {X.shape[1]} features, "
                f"{len(classes)} classes"
                + ("" if method == "non-private" else f", epsilon={self.epsilon}, delta={self.delta}"),
                file=sys.stderr,
            )
        # data-independent facts saved with the model: the labels (when JSON can hold them)
        # and which hyperparameter the fit selects on the data (for the guarantee's summary)
        cv = _cross_validated(method, self.lam, self.clip)
        source = _classes_source(self.schema, self.classes)
        loss = self._loss(method, len(classes))
        try:
            extra = json.dumps(
                {"classes": classes.tolist(), "cross_validated": cv, "classes_from": source}
            )
        except TypeError:
            extra = json.dumps({"cross_validated": cv, "classes_from": source})
        y_enc = np.ascontiguousarray(y_enc, dtype=np.uint32)
        reservation = self._reserve(X, y_enc, method, schema_text)
        # a fit that fails after it started stays charged (reserved): its failure is an
        # outcome of the data, and retrying until success would spend several times the charge
        native = self._train(X, y_enc, classes, method, bias, extra, loss, schema_text)
        if reservation is not None:
            reservation.confirm("python fit")
        self.classes_ = classes
        self._set_native(native)
        self.fit_warnings_ = leaks
        if self.verbose:
            g = self.guarantee_
            print(
                f"[privpred] fitted in {time.perf_counter() - started:.2f} s; "
                + (g["summary"] if g else "no privacy guarantee (non-private reference model)"),
                file=sys.stderr,
            )
        return self

    def _check_knobs(self, method: str) -> None:
        """Refuses a parameter the method would ignore (the rule ``privpred train`` applies
        to its flags): ``lam`` with DP-SGD, ``clip`` and DP-SGD's schedule with any other
        method, ``teachers`` but with subsample-and-aggregate, ``budget`` with a method whose
        answers spend none."""
        _native.check_knobs(
            method,
            self.lam is not None,
            self.clip is not None,
            self.teachers is not None,
            (self.batch_size is not None, self.epochs is not None, self.learning_rate is not None),
            self.budget is not None,
        )

    def _classes(self, y, method):
        """The declared classes and ``y``'s class indices (see ``classes``)."""
        declared = self.classes
        if declared is None:
            if method != "non-private":
                raise ValueError(
                    "invalid classes = None: a private method needs the class labels declared "
                    "(classes=[...], or a schema), a public parameter released with the model; "
                    "read from y, the labels present would be a statistic of the private data. "
                    "Give classes='observed' only if the set of labels present is public"
                )
            return np.unique(y, return_inverse=True)
        if isinstance(declared, str):  # "observed": declared public by the caller
            return np.unique(y, return_inverse=True)
        classes = np.asarray(declared)
        if classes.ndim != 1 or len(classes) < 2:
            raise ValueError(
                f"invalid classes = {declared!r}: must list at least 2 class labels"
            )
        lookup = {c: i for i, c in enumerate(classes.tolist())}
        if len(lookup) != len(classes):
            raise ValueError(f"invalid classes = {declared!r}: the labels must be distinct")
        y_enc = np.empty(len(y), dtype=np.int64)
        for row, v in enumerate(np.asarray(y).tolist()):
            i = lookup.get(v)
            if i is None:
                raise ValueError(
                    f"invalid y: the label at row {row} is not one of the declared classes "
                    f"({len(classes)} given in classes=); labels outside them are an error, "
                    "not dropped"
                )
            y_enc[row] = i
        return classes, y_enc

    def _table(self, X, y):
        """Raw table rows through the schema: encoded rows, class indices, the classes and
        the schema's JSON text (ValueError naming the row and column of a mismatch)."""
        text, schema = _schema.load_schema(self.schema)
        Xe, y_enc = _schema.encode(X, schema, text, y)
        self.n_features_in_ = len(_schema.feature_names(schema))
        if hasattr(X, "columns"):
            self.feature_names_in_ = np.asarray(_schema.feature_names(schema), dtype=object)
        else:
            self.__dict__.pop("feature_names_in_", None)
        classes = _schema.classes_like(_schema.classes_of(schema), y)
        return Xe, y_enc, classes, text

    def _reserve(self, X, y_enc, method, schema_text=None):
        """Reserves the fit's charge on the odometer (None without one)."""
        if self.odometer is None:
            return None
        if method != "non-private":
            if self.random_state is not None:
                raise ValueError(
                    "invalid random_state with odometer: a seeded fit is an experiment whose "
                    "noise can be regenerated from the seed, not a release the odometer can add "
                    "up; fit with random_state=None"
                )
            if "cv" in (self.lam, self.clip):
                raise ValueError(
                    "invalid lam/clip = 'cv' with odometer: the hold-out selection looks at the "
                    "private data without privacy (the model's guarantee is not valid), and the "
                    "odometer adds up only guarantees that hold; give a public value or 'private'"
                )
            if not self.public_search and search_context() is not None:
                raise ValueError(
                    "invalid odometer inside a scikit-learn search or cross-validation: each "
                    "fit there is another release chosen among on the same data, outside the "
                    "guarantee; search on public data (public_search=True), or fit once"
                )
        # the key given, else a privately drafted schema's (one limit for the draft and the
        # fits), else the training rows' identity: the CLI's rule
        key = _native.odometer_fit_key(
            None if self.odometer_key is None else str(self.odometer_key),
            schema_text,
            X,
            y_enc,
        )
        return _native.odometer_reserve(
            os.fspath(self.odometer),
            key,
            method,
            None if method == "non-private" else float(self.epsilon),
            float(self.delta),
            None if self.budget is None else int(self.budget),
            self.neighbours,
            self.calibration,
        )

    def _train(self, X, y_enc, classes, method, bias, extra, loss, schema_text=None):
        return _native.train(
            X,
            y_enc,
            len(classes),
            method,
            epsilon=None if method == "non-private" else float(self.epsilon),
            delta=float(self.delta),
            budget=None if self.budget is None else int(self.budget),
            lam=self._value_or_cv("lam", self.lam),
            calibration=self.calibration,
            neighbours=self.neighbours,
            bias=bias,
            unit_ball=self.unit_ball or "clip:1",  # a schema's rows are inside the ball
            seed=self._seed(),
            teachers=self.teachers,
            clip=self._value_or_cv("clip", self.clip),
            batch_size=self.batch_size,
            epochs=None if self.epochs is None else float(self.epochs),
            learning_rate=None if self.learning_rate is None else float(self.learning_rate),
            extra=extra,
            n_jobs=_threads(self.n_jobs),
            select=self._select(),
            loss=loss,
            schema=schema_text,
            public_n=None if self.public_n is None else int(self.public_n),
            external_search=method != "non-private"
            and not self.public_search
            and search_context() is not None,
            allow_seeded=bool(self.allow_seeded),
        )

    def _set_native(self, native) -> None:
        self._native = native
        self.__dict__.pop("_saved_to", None)  # a new fit is a new model, not the saved one
        g = native.guarantee_json()
        self.guarantee_ = None if g is None else json.loads(g)
        info = json.loads(native.info_json())
        if self.guarantee_ is not None:
            py_extra = (info.get("extra") or {}).get("python") or {}
            if "cross_validated" in py_extra:  # saved by Python: known
                cv = py_extra["cross_validated"]
                gaps = [f"the {cv} chosen by cross-validation on the same data"] if cv else []
            else:  # e.g. a file of `privpred train`
                gaps = ["any hyperparameter chosen on the same data"]
            if py_extra.get("classes_from") == "observed":
                gaps.append("the class labels, read from the training labels and declared public by the caller")
            self.guarantee_["summary"] = _summary(self.guarantee_, gaps)
        self.info_ = info
        self.release_ = info["release"]
        self.cross_validation_ = (info.get("extra") or {}).get("cross_validation")
        self.private_diagnostics_ = json.loads(native.private_diagnostics_json())
        self.lambda_ = info["lambda"]
        if self.lambda_ is None and info["method"] == "non-private":
            cv = self.cross_validation_ or {}
            self.lambda_ = cv.get("chosen") if cv.get("parameter") == "lambda" else (
                None if self.lam is None or isinstance(self.lam, str) else float(self.lam))
        self.theta_ = native.coef()
        self.__dict__.pop("coef_", None)
        self.__dict__.pop("intercept_", None)
        layout = native.layout()
        if layout is not None:
            coef, intercept = layout
            if coef.shape[0] == 2 and len(self.classes_) == 2:
                # scikit-learn's binary layout: one row, positive class minus negative
                coef, intercept = coef[1:] - coef[:1], intercept[1:] - intercept[:1]
            self.coef_, self.intercept_ = coef, intercept

    # ---- prediction ------------------------------------------------------------------
    def _queries(self, X) -> np.ndarray:
        check_is_fitted(self)
        schema_text = self._native.schema_json()
        if schema_text is not None:  # raw rows through the model's schema
            return _schema.encode(X, json.loads(schema_text), schema_text)[0]
        X = validate_data(self, X, reset=False, dtype=np.float32, order="C", accept_sparse="csr")
        if sp.issparse(X):
            X = np.ascontiguousarray(X.toarray(), dtype=np.float32)
        return X

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
        """Compute the logits theta^T x (binary: their difference) of a public model.

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
        """Answers left of the budget B (None: unlimited).

        Read from the durable ledger when the model answers through one
        (``save(..., ledger=...)``, ``load(..., ledger=...)``), else from the in-memory
        ledger.
        """
        check_is_fitted(self)
        total, spent = self._native.budget_state()
        return None if total is None else total - spent

    # ---- artifacts -------------------------------------------------------------------
    def save(self, path, ledger=None, signing_key=None) -> None:
        """Write the model as a signed privpred model file.

        The file is the one ``privpred train`` writes: ``privpred serve``, ``predict``,
        ``evaluate`` and :func:`privpred.load` read it. It is signed with the owner's
        signing key and, for a model holding non-private parameters (prediction
        sensitivity, subsample-and-aggregate, non-private), sealed with the sealing key
        next to it. Seeded models (``random_state`` given) are saved as experiments, which
        ``serve`` and ``predict`` refuse.

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
        signing_key : str or os.PathLike, optional
            The ``signing.key`` of ``privpred key new``. Default: the key in the user's
            config directory (``$XDG_CONFIG_HOME/privpred/keys``, else
            ``~/.config/privpred/keys``), created on first use, as for ``privpred train``.

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
        self._native.save(
            os.fspath(path),
            None if ledger is None else os.fspath(ledger),
            None if signing_key is None else os.fspath(signing_key),
        )
        if ledger is None and _spends_budget(self):
            # the saved file now carries this model's identity and budget: answering from the
            # in-memory ledger as well would give a second budget (answers here, then B more
            # through the file's ledger)
            self._saved_to = os.fspath(path)

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        # measured on the private data without noise: never leaves the process in a pickle
        state.pop("private_diagnostics_", None)
        # whether the training columns had mean 0 and variance 1: a statistic of the data
        state.pop("fit_warnings_", None)
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
                # the estimator existed with this guarantee (``guarantee_`` states its validity)
                # a seeded one as it was (its answers were never a release)
                self._native = _native.load(p, None, False, True, allow_seeded=True)


def _bias_value(bias, fit_intercept: bool = True) -> float:
    """The bias feature's value from ``fit_intercept`` and ``bias`` (see the class docstring)."""
    if not fit_intercept:
        if bias is None or bias is False:
            return 0.0
        raise ValueError(
            f"invalid bias = {bias!r} with fit_intercept=False: bias is the value of the "
            "intercept's feature; set fit_intercept=True, or leave bias=None"
        )
    if bias is None:
        return INTERCEPT_BIAS
    if bias is True:
        return 0.7071067811865476  # sqrt(1/2), the value before it became a parameter
    if isinstance(bias, numbers.Real) and not isinstance(bias, (bool, np.bool_)) and 0 < bias < 1:
        return float(bias)
    raise ValueError(
        f"invalid bias = {bias!r}: with fit_intercept=True it must be a number in (0, 1) (the "
        "bias feature's value v, rows [x*sqrt(1 - v**2), v]), True (sqrt(1/2)) or None "
        f"({INTERCEPT_BIAS}); fit_intercept=False fits no intercept"
    )


def _cross_validated(method: str, lam: Any, clip: Any) -> Optional[str]:
    """The hyperparameter a fit selects on the training data (as the core does), or None."""
    if method == "dp-sgd":
        return "clip" if clip == "cv" else None
    if method == "subsample-aggregate":
        return None
    return "lambda" if isinstance(lam, str) and lam == "cv" else None


def _classes_source(schema, classes) -> str:
    """Where the classes came from, saved with the model: ``schema``, ``parameter``
    (``classes=[...]``), ``observed`` (the labels present, declared public by the caller)
    or ``labels`` (the non-private model's labels)."""
    if schema is not None:
        return "schema"
    if classes is None:
        return "labels"
    return "observed" if isinstance(classes, str) else "parameter"


def _threads(n_jobs: Optional[int]) -> Optional[int]:
    """Threads for ``n_jobs`` (joblib's convention: -1 all cores, -2 all but one)."""
    if n_jobs is None:
        return None
    cpus = os.cpu_count() or 1
    if n_jobs == 0 or n_jobs > MAX_THREADS:
        raise ValueError(
            f"invalid n_jobs = {n_jobs}: must be a number of threads in 1..={MAX_THREADS}, -1 "
            "(all cores), -2 (all but one), ... or None"
        )
    return int(n_jobs) if n_jobs > 0 else max(1, cpus + 1 + int(n_jobs))


def load(
    path,
    ledger=None,
    init_ledger: bool = False,
    allow_invalid_guarantee: bool = False,
    trust=None,
    sealing_key=None,
    allow_unsigned: bool = False,
    allow_seeded: bool = False,
) -> PrivateLogisticRegression:
    """Load a privpred linear-model artifact (from ``privpred train`` or ``save``).

    Parameters
    ----------
    path : str or os.PathLike
        The safetensors file.
    ledger : str or os.PathLike, optional
        Private-prediction methods: answer through this durable SQLite budget ledger (a
        path or ``sqlite:PATH``), the one ``privpred predict --ledger`` and ``serve
        --ledger`` use for the same file. Default: the CLI's default ledger beside the
        file, so the model spends the budget ``predict`` and ``serve`` spend.
    init_ledger : bool, default=False
        Create the ledger file and the model's record (total B); refused if the record
        exists. Without it a missing ledger or record is an error, as for ``privpred serve``.
    allow_invalid_guarantee : bool, default=False
        Load a model whose guarantee does not hold (``valid_guarantee: false``: a ``paper``
        calibration, or a hyper-parameter selected without privacy). Refused without it, as
        ``privpred predict`` and ``serve`` refuse it without ``--allow-invalid-guarantee``.
    trust : str or os.PathLike, optional
        The verify key (``verify.pub``) whose signatures are trusted, as ``--trust``.
        Default: the one of the key in the user's config directory. A file not signed by
        it is refused.
    sealing_key : str or os.PathLike, optional
        The ``sealing.key`` that opens sealed models. Default: the one next to the trusted
        verify key.
    allow_unsigned : bool, default=False
        Load a file that is unsigned or signed by a key that is not trusted, as
        ``--allow-unsigned``.
    allow_seeded : bool, default=False
        Answer from a model trained with a seed (``random_state``). Refused without it, as
        ``privpred predict`` and ``serve`` refuse seeded models: its noise can be regenerated
        from the seed, so its answers are an experiment's, not a private release
        (``info_["experiment_seed"]`` then names the seed).

    Returns
    -------
    PrivateLogisticRegression
        A fitted estimator. Its ``classes_`` are those saved by Python, else
        ``0..C-1``. A private-prediction model answers through the ledger ``privpred
        predict`` uses for the file: ``ledger``, or by default ``<path>.ledger.sqlite``
        beside it, with the file's spend mark ``<path>.ledger-mark.json``.

    Raises
    ------
    ValueError
        For a file that is not a valid privpred model (corrupt, edited, wrong format or
        version), not signed by a trusted key (without ``allow_unsigned=True``), sealed with
        a key that is not given, or whose guarantee is not valid (without
        ``allow_invalid_guarantee=True``).
    OSError
        For a file that cannot be read.
    """
    native = _native.load(
        os.fspath(path),
        None if ledger is None else os.fspath(ledger),
        bool(init_ledger),
        bool(allow_invalid_guarantee),
        None if trust is None else os.fspath(trust),
        None if sealing_key is None else os.fspath(sealing_key),
        bool(allow_unsigned),
        bool(allow_seeded),
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
    if guarantee is not None and not info["spends_budget"]:
        params.pop("budget")  # answers cost nothing: no inference budget to state
    seed = (info.get("seed_policy") or {}).get("seed")
    if seed is not None:
        params["random_state"] = seed
    lam_methods = ("non-private", "model-sensitivity", "loss-perturbation", "prediction-sensitivity")
    if info.get("lambda") is not None and info["method"] in lam_methods:
        params["lam"] = info["lambda"]
    bias = [s for s in info.get("preprocessing_steps", []) if s.startswith("bias:")]
    params["fit_intercept"] = bool(bias)
    if bias:
        params["bias"] = float(bias[0].split()[0][len("bias:"):])
    schema_text = native.schema_json()
    if schema_text is not None:
        params["schema"] = json.loads(schema_text)
    else:
        params["unit_ball"] = info["unit_ball"]
    est = PrivateLogisticRegression(**params)
    py_extra = (info.get("extra") or {}).get("python") or {}
    classes = py_extra.get("classes")
    if classes is None and schema_text is not None:
        classes = _schema.classes_of(params["schema"])
    est.classes_ = np.asarray(classes) if classes is not None else np.arange(info["classes"])
    est.n_features_in_ = (
        info["input_dim"] if schema_text is None
        else len(_schema.feature_names(params["schema"]))
    )
    est._set_native(native)
    return est
