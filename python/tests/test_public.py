"""Only what the caller declares is public: the class set (``classes=``), N under add/remove
(``public_n``), and a selection made by a scikit-learn search around the estimator (marked
``external-search``, not valid, unless ``public_search=True``)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from conftest import released_metadata
from privpred import PrivateLogisticRegression as PLR


def toy(n=240, d=6, seed=3, labels=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    k = np.arange(n) % len(labels)
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[np.arange(n), k] += 4.0
    return X, np.asarray(labels, dtype=object)[k]


def metadata(path):
    return released_metadata(path)


def test_a_private_fit_needs_the_classes_declared():
    X, y = toy()
    with pytest.raises(ValueError, match="classes"):
        PLR(unit_ball="normalize", method="model-sensitivity", epsilon=1.0).fit(X, y)
    # the non-private model may read them from the labels
    assert list(PLR(unit_ball="normalize", method="non-private").fit(X, y).classes_) == ["a", "b", "c"]


def test_a_label_outside_the_declared_classes_is_an_error_not_a_filter():
    X, y = toy()
    y = y.copy()
    y[7] = "rare-dx-of-patient-0042"
    with pytest.raises(ValueError, match="row 7"):
        PLR(unit_ball="normalize", method="model-sensitivity", epsilon=1.0, classes=["a", "b", "c"]).fit(X, y)


def test_a_rare_label_of_a_neighbour_changes_nothing_saved(tmp_path):
    """D and D' (one row relabelled with a label of the declared set that D never uses) give
    saved files and pickles whose state is the same apart from the noisy weights."""
    X, y = toy()
    yn = y.copy()
    yn[0] = "d"
    declared = ["a", "b", "c", "d"]
    metas, states = [], []
    for i, labels in enumerate((y, yn)):
        est = PLR(unit_ball="normalize", method="model-sensitivity", epsilon=1.0, lam=1e-2, classes=declared,
                  random_state=5).fit(X, labels)
        assert list(est.classes_) == declared
        p = tmp_path / f"{i}.safetensors"
        est.save(p)
        metas.append(metadata(p))
        state = pickle.loads(pickle.dumps(est)).__dict__
        states.append({k: v for k, v in state.items()
                       if k not in ("_native", "theta_", "coef_", "intercept_", "_saved_to")})
        assert "fit_warnings_" not in pickle.loads(pickle.dumps(est)).__dict__
    assert metas[0] == metas[1]
    assert json.dumps(states[0], default=str) == json.dumps(states[1], default=str)


def test_add_remove_needs_a_public_n_and_saves_nothing_of_the_exact_n(tmp_path):
    X, y = toy()
    with pytest.raises(ValueError, match="public_n"):
        PLR(unit_ball="normalize", method="loss-perturbation", epsilon=1.0, lam=1e-2, classes=["a", "b", "c"],
            neighbours="add-remove").fit(X, y)
    metas = []
    for i, (Xd, yd) in enumerate(((X, y), (X[1:], y[1:]))):
        # under add-remove the public rule does not apply (its batch default of 256 exceeds
        # the 240 rows): the batch is given
        est = PLR(unit_ball="normalize", method="dp-sgd", epsilon=1.0, delta=1e-5, clip=0.5, epochs=1.0, batch_size=32,
                  classes=["a", "b", "c"], neighbours="add-remove", public_n=250,
                  random_state=2).fit(Xd, yd)
        assert est.guarantee_["assumptions"]["n"] == 250
        p = tmp_path / f"{i}.safetensors"
        est.save(p)
        metas.append(metadata(p))
    assert metas[0] == metas[1]
    text = json.dumps(metas[0])
    assert '\\"n\\":240' not in text and '\\"train_rows\\":240' not in text


def test_a_search_around_the_estimator_is_marked_in_the_saved_model(tmp_path):
    X, y = toy()
    search = GridSearchCV(
        PLR(unit_ball="normalize", method="model-sensitivity", epsilon=1.0, classes=["a", "b", "c"]),
        {"lam": [1e-2, 1e-1]},
        cv=2,
    )
    with pytest.warns(Warning):
        search.fit(X, y)
    g = search.best_estimator_.guarantee_
    assert g["valid_guarantee"] is False
    assert g["selection"]["method"] == "external-search"
    p = tmp_path / "best.safetensors"
    search.best_estimator_.save(p)
    assert "external-search" in json.dumps(metadata(p))
    # stated public: nothing marked
    public = GridSearchCV(
        PLR(unit_ball="normalize", method="model-sensitivity", epsilon=1.0, classes=["a", "b", "c"], public_search=True),
        {"lam": [1e-2, 1e-1]},
        cv=2,
    )
    public.fit(X, y)
    assert public.best_estimator_.guarantee_["valid_guarantee"] is True
