"""Type stubs of the Rust extension module ``privpred._native``."""

from os import PathLike
from typing import List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str

class BudgetExhausted(Exception):
    """The inference budget B is spent: the guarantee covers no further answers."""

class NativeModel:
    def predict(
        self, x: npt.NDArray[np.float32]
    ) -> Tuple[npt.NDArray[np.uint32], Optional[npt.NDArray[np.float64]]]: ...
    def logits_of(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]: ...
    def coef(self) -> Optional[npt.NDArray[np.float64]]: ...
    def layout(
        self,
    ) -> Optional[Tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]: ...
    def guarantee_json(self) -> Optional[str]: ...
    def budget_state(self) -> Tuple[Optional[int], int]: ...
    def info_json(self) -> str: ...
    def private_diagnostics_json(self) -> str: ...
    def schema_json(self) -> Optional[str]: ...
    def save(
        self,
        path: Union[str, PathLike[str]],
        ledger: Optional[str] = None,
        signing_key: Optional[str] = None,
    ) -> None: ...

def train(
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.uint32],
    classes: int,
    method: str,
    epsilon: Optional[float] = None,
    delta: float = 0.0,
    budget: Optional[int] = None,
    lam: Optional[float] = None,
    calibration: str = "corrected",
    neighbours: str = "replace-one",
    bias: float = 0.0,
    unit_ball: str = "normalize",
    seed: Optional[int] = None,
    teachers: Optional[int] = None,
    clip: Optional[float] = None,
    batch_size: Optional[int] = None,
    epochs: Optional[float] = None,
    learning_rate: Optional[float] = None,
    extra: Optional[str] = None,
    n_jobs: Optional[int] = None,
    loss: str = "softmax",
    schema: Optional[str] = None,
    public_n: Optional[int] = None,
    external_search: bool = False,
    allow_seeded: bool = False,
) -> NativeModel: ...
def check_knobs(
    method: str,
    lam: bool,
    clip: bool,
    teachers: bool,
    schedule: Tuple[bool, bool, bool],
    budget: bool,
) -> None: ...
def schema_check(text: str, source: str) -> str: ...
def encode_table(
    schema: str, rows: List[List[str]], labels: Optional[List[str]] = None
) -> Tuple[npt.NDArray[np.float32], Optional[npt.NDArray[np.uint32]]]: ...
def encode_columns(
    schema: str,
    columns: List[Union[npt.NDArray[np.float64], Tuple[List[str], npt.NDArray[np.int64]]]],
    labels: Optional[Union[npt.NDArray[np.float64], Tuple[List[str], npt.NDArray[np.int64]]]] = None,
) -> Tuple[npt.NDArray[np.float32], Optional[npt.NDArray[np.uint32]]]: ...
def load(
    path: Union[str, PathLike[str]],
    ledger: Optional[str] = None,
    init_ledger: bool = False,
    allow_invalid_guarantee: bool = False,
    trust: Optional[str] = None,
    sealing_key: Optional[str] = None,
    allow_unsigned: bool = False,
    allow_seeded: bool = False,
) -> NativeModel: ...
class OdometerReservation:
    def confirm(self, note: str) -> None: ...
    def cancel(self) -> None: ...
    def summary_json(self) -> str: ...

def dataset_identity(x: npt.NDArray[np.float32], y: npt.NDArray[np.uint32]) -> str: ...
def odometer_limit(
    odometer: str, key: str, epsilon: float, delta: float = 0.0, neighbours: str = "replace-one"
) -> str: ...
def odometer_show(odometer: str, key: Optional[str] = None) -> str: ...
def odometer_reserve(
    odometer: str,
    key: str,
    method: str,
    epsilon: Optional[float],
    delta: float,
    budget: Optional[int],
    neighbours: str,
    calibration: str,
) -> OdometerReservation: ...
def load_dataset(
    spec: str, data_dir: Optional[str] = None, fetch: bool = True
) -> Tuple[
    npt.NDArray[np.float32],
    npt.NDArray[np.uint32],
    npt.NDArray[np.float32],
    npt.NDArray[np.uint32],
    str,
]: ...
def calibrate(
    method: str,
    epsilon: float,
    delta: float = 0.0,
    budget: Optional[int] = None,
    n: Optional[int] = None,
    lam: Optional[float] = None,
    classes: int = 10,
    batch_size: Optional[int] = None,
    epochs: Optional[float] = None,
    calibration: str = "corrected",
    neighbours: str = "replace-one",
) -> str: ...
def epsilon_dp_sgd(
    sample_rate: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    accountant: str = "rdp",
    neighbours: str = "add-remove",
) -> float: ...
def noise_multiplier(
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    steps: int,
    accountant: str = "rdp",
    neighbours: str = "add-remove",
) -> Tuple[float, float]: ...
