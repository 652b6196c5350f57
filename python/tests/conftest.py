"""Shared helpers: the CLI binary, real data with privpred_data::testdata's skip convention."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The tests' own config directory: the default key set that ``save`` and ``privpred train``
# create on first use (and ``load``/``predict`` trust) lives there, never in the real home.
# Set before anything runs, so the CLI processes the tests start inherit it.
_CONFIG_HOME = Path(tempfile.mkdtemp(prefix="privpred-pytest-config-"))
os.environ["XDG_CONFIG_HOME"] = str(_CONFIG_HOME)
SKIP_MARKER = "privpred-test-skip:"


def cli_path() -> Path:
    """The `privpred` binary: $PRIVPRED_BIN, else target/release/privpred of this checkout."""
    p = Path(os.environ.get("PRIVPRED_BIN", REPO / "target" / "release" / "privpred"))
    if not p.exists():
        pytest.fail(f"{p} not found: build it with `cargo build --release -p privpred` (or set PRIVPRED_BIN)")
    return p


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([str(cli_path()), *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"privpred {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


def cli_json(*args: str):
    return json.loads(cli(*args, "--json").stdout)


def data_required() -> bool:
    return os.environ.get("PRIVPRED_REQUIRE_DATA", "").strip() == "1"


def dataset_or_skip(spec: str, test: str):
    """The CLI's split of `spec` through its loader and cache, or one skip line.

    Mirrors privpred_data::testdata: absent data skips with one `privpred-test-skip:` line on
    standard error, unless PRIVPRED_REQUIRE_DATA=1 (then it is fetched like the CLI does,
    and its absence fails the test).
    """
    import privpred

    try:
        return privpred.datasets.load(spec, fetch=data_required())
    except ValueError as e:
        if data_required():
            pytest.fail(f"{test} needs {spec}, and PRIVPRED_REQUIRE_DATA=1 forbids skipping: {e}")
        line = (
            f"{SKIP_MARKER} {test} skipped: {spec} not found (searched $PRIVPRED_DATA_DIR, the cache); "
            f"run `privpred data fetch {spec}`, or set PRIVPRED_REQUIRE_DATA=1 to make this a failure"
        )
        sys.stderr.write(line + "\n")
        pytest.skip(line)


@pytest.fixture(scope="session")
def digits():
    """scikit-learn's digits (raw 0..16 pixels), a fixed 70/30 split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def envelope(path):
    """The public header and the payload of a model file (format version 2: magic, version,
    header length, canonical JSON header, payload length, payload, signature)."""
    import struct

    raw = Path(path).read_bytes()
    assert raw[:8] == b"PPMODEL\0", "not a privpred model file"
    (hlen,) = struct.unpack("<I", raw[12:16])
    header = json.loads(raw[16 : 16 + hlen])
    (plen,) = struct.unpack("<Q", raw[16 + hlen : 24 + hlen])
    return header, raw[24 + hlen : 24 + hlen + plen]


def released_metadata(path):
    """What a reader of the file sees, without the fields random by design (the model's
    ledger identity, the hashes and signature over the noisy release, a seal's nonce): the
    public header, and the payload's metadata when it is stored in the clear."""
    import struct

    header, payload = envelope(path)
    header = dict(header)
    for k in ("ledger_id", "payload_sha256", "signer"):
        header.pop(k, None)
    if header.get("sealed"):
        header["sealed"] = {k: v for k, v in header["sealed"].items() if k != "nonce"}
        return {"header": header}
    (n,) = struct.unpack("<Q", payload[:8])
    meta = json.loads(payload[8 : 8 + n])["__metadata__"]
    for k in ("weights_sha256", "checksum", "ledger_id"):
        meta.pop(k, None)
    return {"header": header, "payload": meta}
