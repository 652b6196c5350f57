"""The public Python API's docstrings follow the numpydoc standard.

Every public object reachable from ``privpred.__all__`` (the classes, their public methods
and properties, and the functions of ``accounting``, ``datasets`` and ``odometer``) is run
through ``numpydoc.validate.validate`` and the test fails on any of the codes in
``CHECKED``: every numpydoc check except these, left out as style choices:

- ES01 (no extended summary): a one-line summary is enough for simple members.
- SA01 (no See Also section) and EX01 (no Examples section): examples live in
  ``docs/python.md`` and ``python/examples``, where they are run.
- GL09 and GL10 (placement of the deprecation directive): nothing is deprecated.

numpydoc is required (CI installs it): without it the test fails rather than skipping.
"""

from __future__ import annotations

import inspect
import types

import pytest

import privpred

try:
    import numpydoc.validate as npd_validate
except ImportError:  # pragma: no cover - exercised only without numpydoc
    npd_validate = None

CHECKED = frozenset(
    ["GL01", "GL02", "GL03", "GL05", "GL06", "GL07", "GL08"]
    + [f"SS0{i}" for i in range(1, 7)]
    + [f"PR{i:02d}" for i in range(1, 11)]
    + [f"RT0{i}" for i in range(1, 6)]
    + ["YD01"]
)


def _members(cls: type, path: str):
    """Public methods and properties that privpred defines on ``cls``.

    Inherited members and those scikit-learn generates on the class (such as
    ``set_score_request``) carry their own library's docstrings and are not checked here.
    """
    for name, obj in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(obj, property):
            fn = obj.fget
        elif isinstance(obj, (staticmethod, classmethod)) or inspect.isroutine(obj):
            fn = getattr(cls, name)
        else:
            continue
        if getattr(fn, "__module__", "").startswith("privpred"):
            yield f"{path}.{name}"


def public_names():
    """Import paths of every public object of ``privpred.__all__``."""
    names = []
    for name in privpred.__all__:
        obj = getattr(privpred, name)
        path = f"privpred.{name}"
        if isinstance(obj, types.ModuleType):
            for fn in obj.__all__:
                names.append(f"{path}.{fn}")
        elif inspect.isclass(obj):
            names.append(path)
            names.extend(_members(obj, path))
        elif callable(obj):
            names.append(path)
    return sorted(set(names))


@pytest.mark.parametrize("name", public_names())
def test_docstring_follows_numpydoc(name):
    if npd_validate is None:
        pytest.fail("numpydoc is not installed: `pip install numpydoc` to check the docstrings")
    result = npd_validate.validate(name)
    errors = [f"{code}: {msg}" for code, msg in result["errors"] if code in CHECKED]
    assert not errors, f"{name} ({result['file']}:{result['file_line']}):\n  " + "\n  ".join(errors)
