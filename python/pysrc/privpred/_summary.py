"""The guarantee in one plain-language sentence."""

from __future__ import annotations

from typing import Any, Dict, Iterable


def _num(v: float) -> str:
    return f"{v:g}"


def summary(g: Dict[str, Any], not_covered: Iterable[str] = ()) -> str:
    """One sentence saying what the guarantee ``g`` (the ``privpred calibrate --json`` object)
    protects, against whom, for how many answers, and what it does not cover.

    Parameters
    ----------
    g : dict
        The guarantee's structured fields.
    not_covered : iterable of str
        Further releases of this fit that the guarantee does not cover (e.g. a
        cross-validated lambda), each a noun phrase.

    Returns
    -------
    str
        The sentence.
    """
    eps, delta = _num(float(g["epsilon"])), _num(float(g["delta"]))
    add_remove = g.get("neighbours") == "add-remove"
    change = "added or removed" if add_remove else "replaced by another"
    if g.get("budget_unlimited", g.get("budget") is None):
        who = "Anyone who sees this model and any number of its answers"
    else:
        b = int(g["budget"])
        who = (
            f"Anyone who sees up to B = {b} answers of this model (its parameters stay secret "
            f"and further answers are refused)"
        )
    gaps = list(not_covered)
    gaps += [
        "the number of features stored with the model (the class labels, and under "
        "add/remove the training-set size N, are public parameters the caller declares)",
        "preprocessing fitted on the data outside this estimator",
        "and every other fit on the same data (each is another release)",
    ]
    sentence = (
        f"{who}, even knowing every other training example, can tell whether any one training "
        f"example was {change} no better than ({eps}, {delta})-differential privacy allows "
        f"(calibration '{g.get('calibration')}'); not covered: {', '.join(gaps)}."
    )
    if not g.get("valid_guarantee", True):
        selection = g.get("selection") or {}
        if g.get("calibration") == "paper":
            why = (f"the '{g.get('calibration')}' calibration reproduces the published rules, "
                   "which do not deliver it")
        elif selection.get("method") == "non-private-holdout":
            why = ("the hyperparameter was selected on the private data without privacy, "
                   "outside this guarantee")
        elif selection.get("method") == "external-search":
            why = ("it was chosen by a search or cross-validation that fitted it several times "
                   "on the same private data, outside this guarantee")
        else:
            why = "the stored calibration does not deliver it"
        sentence = f"NOT a valid guarantee ({why}): {sentence[0].lower()}{sentence[1:]}"
    return sentence
