"""Privacy spent where scikit-learn hides it: the warning class, the detection of fits the
stated guarantee does not cover (inside a search or cross-validation, after preprocessing
fitted on the private data), and a scaler with public bounds that spends nothing."""

from __future__ import annotations

import sys
import warnings
from typing import Any, List, Optional

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils import check_array

try:  # scikit-learn >= 1.6
    from sklearn.utils import get_tags as _get_tags
except ImportError:  # older scikit-learn
    _get_tags = None

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data
except ImportError:  # older scikit-learn

    def validate_data(est, X, y="no_validation", reset=True, **kw):
        return est._validate_data(X, y, reset=reset, **kw)


__all__ = ["PrivacyLeakWarning", "PublicBoundsScaler"]


class PrivacyLeakWarning(UserWarning):
    """Information about the private data is released outside the stated guarantee.

    Raised as a warning (never an error) when a private fit is one of several fits on the
    same data (inside scikit-learn's ``cross_val_score``, ``GridSearchCV`` and other
    searches and ensembles: each fit is another release, and the guarantee of each model
    covers that one fit only), or when it follows preprocessing fitted on the private data
    (e.g. a ``StandardScaler`` in the same ``Pipeline``), whose statistics the guarantee does
    not cover. Filter it like any warning::

        warnings.simplefilter("error", privpred.PrivacyLeakWarning)
    """


# scikit-learn packages whose meta-estimators and helpers fit an estimator several times on
# (overlapping parts of) the same data: searches, cross-validation, feature selection by
# refitting, calibration folds, ensembles, one-vs-rest
_MULTI_FIT_MODULES = (
    "sklearn.model_selection",
    "sklearn.feature_selection",
    "sklearn.calibration",
    "sklearn.ensemble",
    "sklearn.multiclass",
    "sklearn.multioutput",
    "sklearn.semi_supervised",
)


def _is_stateless(step: Any) -> bool:
    """Whether a preprocessing step learns nothing from the data it is fitted on."""
    if step is None or isinstance(step, str):  # "passthrough", "drop"
        return True
    if isinstance(step, PublicBoundsScaler):
        return True
    for attr in ("steps",):  # Pipeline
        if hasattr(step, attr) and isinstance(getattr(step, attr), list):
            return all(_is_stateless(s) for _, s in getattr(step, attr))
    if hasattr(step, "transformer_list"):  # FeatureUnion
        return all(_is_stateless(s) for _, s in step.transformer_list)
    if hasattr(step, "transformers") and isinstance(step.transformers, list):  # ColumnTransformer
        rest = getattr(step, "remainder", "drop")
        return all(_is_stateless(t[1]) for t in step.transformers) and _is_stateless(rest)
    try:
        if _get_tags is not None:
            return not _get_tags(step).requires_fit
        return bool(step._get_tags().get("stateless", False))
    except Exception:  # not a scikit-learn estimator: assume it learns from the data
        return False


def _contains(step: Any, est: Any) -> bool:
    if step is est:
        return True
    if hasattr(step, "steps") and isinstance(step.steps, list):
        return any(_contains(s, est) for _, s in step.steps)
    return False


def search_context() -> Optional[str]:
    """The scikit-learn search, cross-validation or ensemble this fit runs inside (the
    outermost one's name), or None: such a caller fits the estimator several times on the same
    data and keeps what scored best, a selection outside the guarantee."""
    multi = None
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "") or ""
        if module.startswith(_MULTI_FIT_MODULES):
            owner = frame.f_locals.get("self")
            multi = type(owner).__name__ if isinstance(owner, BaseEstimator) else frame.f_code.co_name
        frame = frame.f_back
    return multi


def fit_context(est: Any, X: Optional[np.ndarray] = None) -> List[str]:
    """Why this fit of ``est`` is not the single release its guarantee covers.

    Walks the call stack: a scikit-learn ``Pipeline`` whose steps before ``est`` learn from
    the data (any step whose ``requires_fit`` tag is set, except :class:`PublicBoundsScaler`
    and other stateless steps), and scikit-learn searches, cross-validation and ensembles
    (which fit once per candidate and fold). Without a pipeline, a training matrix whose
    every column has mean 0 and variance 1 is reported as standardised on the data.

    Returns
    -------
    list of str
        One sentence per finding (empty: none found).
    """
    reasons = []
    multi = None
    leaky: List[str] = []
    in_pipeline = False
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "") or ""
        if module.startswith("sklearn."):
            owner = frame.f_locals.get("self")
            if module.startswith("sklearn.pipeline") and hasattr(owner, "steps"):
                steps = owner.steps
                if isinstance(steps, list) and steps and _contains(steps[-1][1], est):
                    in_pipeline = True
                    leaky.extend(
                        f"'{name}' ({type(step).__name__})"
                        for name, step in steps[:-1]
                        if not _is_stateless(step)
                    )
            if module.startswith(_MULTI_FIT_MODULES):
                # the outermost one names the search
                multi = (
                    type(owner).__name__
                    if isinstance(owner, BaseEstimator)
                    else frame.f_code.co_name
                )
        frame = frame.f_back
    if multi is not None and not getattr(est, "public_search", False):
        reasons.append(
            f"this fit runs inside scikit-learn's {multi}, which fits the estimator several "
            "times on overlapping parts of the same private data: each fit is another release, "
            "and each model's guarantee covers its own fit only (k fits on the same rows can "
            "spend up to k times epsilon)"
        )
    if leaky:
        reasons.append(
            "the pipeline fits " + ", ".join(dict.fromkeys(leaky)) + " on the private data "
            "before this estimator: its statistics are released with the pipeline and shape "
            "every answer, outside the guarantee; use privpred.PublicBoundsScaler with public "
            "bounds instead"
        )
    elif not in_pipeline and X is not None and _looks_standardised(X):
        reasons.append(
            "every column of the training data has mean 0 and variance 1, as after a "
            "StandardScaler fitted on it: such statistics of the private data are not covered "
            "by the guarantee; use privpred.PublicBoundsScaler with public bounds instead"
        )
    return reasons


def _looks_standardised(X: np.ndarray) -> bool:
    if not isinstance(X, np.ndarray) or X.ndim != 2 or X.shape[0] < 3:
        return False
    mean = X.mean(axis=0, dtype=np.float64)
    std = X.std(axis=0, dtype=np.float64)
    varying = std > 0
    if not varying.any():
        return False
    return bool(np.all(np.abs(mean) < 1e-4) and np.all(np.abs(std[varying] - 1.0) < 1e-3))


def warn_fit_context(est: Any, X: Optional[np.ndarray] = None) -> List[str]:
    """Emits one :class:`PrivacyLeakWarning` per finding of :func:`fit_context`."""
    reasons = fit_context(est, X)
    for r in reasons:
        warnings.warn(
            f"{type(est).__name__}: {r}. The stated guarantee covers one fit on data that "
            "reached it without data-dependent preprocessing.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
    return reasons


def _bounds(v: Any, name: str) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    if a.ndim > 1 or not np.all(np.isfinite(a)):
        raise ValueError(
            f"invalid {name} = {v!r}: must be a finite number or a 1-D array of finite numbers "
            "(one per feature)"
        )
    return a


class PublicBoundsScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Scale features into [0, 1] by public bounds: spends no privacy budget.

    Each feature is clipped to ``[lower, upper]`` and mapped linearly onto [0, 1]:
    ``(clip(x, lower, upper) - lower) / (upper - lower)``. The bounds are arguments, known
    before the data is seen (e.g. 0 and 255 for pixels, a sensor's range): nothing is
    learned from the data, so the transformer releases nothing about it and spends no part
    of any privacy budget. It is the private counterpart of ``MinMaxScaler`` and
    ``StandardScaler``, whose fitted minima, maxima, means and scales are statistics of the
    private data outside the guarantee. ``fit`` only checks the number of features.

    Parameters
    ----------
    lower : float or array-like of shape (n_features,)
        Public lower bound of each feature.
    upper : float or array-like of shape (n_features,)
        Public upper bound of each feature (each > its lower bound).

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen by ``fit`` (the data's shape, public).
    """

    def __init__(self, lower: Any = 0.0, upper: Any = 1.0):
        self.lower = lower
        self.upper = upper

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        return super().__repr__(N_CHAR_MAX) + "  # public bounds: spends no privacy budget"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False  # nothing is learned from the data
        tags.input_tags.allow_nan = False
        return tags

    def _checked_bounds(self, d: int):
        lo, hi = _bounds(self.lower, "lower"), _bounds(self.upper, "upper")
        for name, a in (("lower", lo), ("upper", hi)):
            if a.ndim == 1 and a.shape[0] != d:
                raise ValueError(
                    f"invalid {name}: {a.shape[0]} bounds for {d} features (give one number, "
                    f"or one per feature)"
                )
        if not np.all(hi > lo):
            raise ValueError(
                f"invalid bounds lower = {self.lower!r}, upper = {self.upper!r}: each upper "
                "bound must be greater than its lower bound"
            )
        return lo, hi

    def fit(self, X, y=None):
        """Check the number of features (nothing is learned from the data).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data (only its shape is used).
        y : None
            Ignored.

        Returns
        -------
        PublicBoundsScaler
            The fitted scaler (self).
        """
        X = validate_data(self, X, dtype=np.float64)
        self._checked_bounds(X.shape[1])
        return self

    def transform(self, X):
        """Clip to the public bounds and map onto [0, 1].

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            The scaled data, every value in [0, 1].
        """
        if hasattr(self, "n_features_in_"):
            X = validate_data(self, X, dtype=np.float64, reset=False)
        else:  # stateless: usable without fit
            X = check_array(X, dtype=np.float64)
        lo, hi = self._checked_bounds(X.shape[1])
        return (np.clip(X, lo, hi) - lo) / (hi - lo)

    def inverse_transform(self, X):
        """Map [0, 1] back onto [lower, upper] (clipped values stay at their bound).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Scaled data.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            The data on the scale of the bounds.
        """
        X = np.asarray(X, dtype=np.float64)
        lo, hi = self._checked_bounds(X.shape[1])
        return X * (hi - lo) + lo
