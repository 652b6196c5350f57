"""privpred: private prediction with (epsilon, delta)-differential privacy.

Python bindings of the privpred Rust core (van der Maaten & Hannun, "The Trade-Offs of
Private Prediction", 2020): a scikit-learn estimator for private multinomial logistic
regression (five private methods), the guarantee of every fitted model, the same
safetensors artifacts as the ``privpred`` command line, DP-SGD accountants with Opacus's
argument names, a client for ``privpred serve``, a scaler with public bounds
(:class:`PublicBoundsScaler`), a private schema draft for tables (:func:`draft_schema`) and
:class:`PrivacyLeakWarning` for releases the guarantee does not cover.
"""

from . import accounting, datasets, odometer
from ._native import BudgetExhausted, __version__
from ._estimator import PrivateLogisticRegression, load
from ._privacy import PrivacyLeakWarning, PublicBoundsScaler
from ._schema import draft_schema
from ._client import Client
from .accounting import calibrate

__all__ = [
    "BudgetExhausted",
    "Client",
    "PrivacyLeakWarning",
    "PrivateLogisticRegression",
    "PublicBoundsScaler",
    "__version__",
    "accounting",
    "datasets",
    "odometer",
    "calibrate",
    "draft_schema",
    "load",
]
