from . import accounting as accounting
from . import datasets as datasets
from ._client import Client as Client
from ._estimator import PrivateLogisticRegression as PrivateLogisticRegression
from ._estimator import load as load
from ._privacy import PrivacyLeakWarning as PrivacyLeakWarning
from ._privacy import PublicBoundsScaler as PublicBoundsScaler
from ._native import BudgetExhausted as BudgetExhausted
from ._native import __version__ as __version__
from .accounting import calibrate as calibrate

__all__: list[str]
