"""The product model's build record, and whether another record measured the model it names or an earlier build.

A record of the product (its model block's checkpoint is ``runs/model/checkpoint``) is of the current product when
its fingerprints are the build record's (``polyvse.provenance.PRODUCT_BUILD_RECORD``): the model's, adapted
languages included, or its trained checkpoint's, whose figures the adaptation stage leaves as they were; and the
same photo side. The records' test holds every such record to it; a generated block marks a link to one that is not.
"""

from __future__ import annotations

import json
from pathlib import Path

from polyvse.provenance import PRODUCT_BUILD_RECORD, is_product_checkpoint

#: `make model`'s run, copied from runs/model/ (training record, metrics, `polyvse model build`'s build.json)
PRODUCT_RUN = "results/model-f8k-full-polyvse-best-s0"
#: what a link to a record of an earlier product build says after it
EARLIER_BUILD_MARK = "(an earlier build of the product model)"


class BuildRecordError(ValueError):
    """The product's build record cannot be read or names no fingerprint."""


def _read(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def build_model(repo: Path) -> dict:
    """The build record's model block: ``fingerprint`` and ``photo_fingerprint``."""
    record = _read(repo / PRODUCT_BUILD_RECORD)
    try:
        model = record["provenance"]["model"]
    except (KeyError, TypeError):
        raise BuildRecordError(f"{PRODUCT_BUILD_RECORD} cannot be read or has no provenance.model") from None
    if not isinstance(model, dict) or not model.get("fingerprint"):
        raise BuildRecordError(f"{PRODUCT_BUILD_RECORD} names no fingerprint")
    return model


def product_fingerprints(repo: Path, model_fingerprint: str | None) -> set[str]:
    """The model fingerprints a record of the product may name: ``model_fingerprint`` (the build record's) and its
    trained checkpoint's, read from ``polyvse model build``'s own record (``build.json``) in the build record's
    ``fingerprints`` or beside the product's training record, where that record names the same model."""
    accepted = {model_fingerprint} if model_fingerprint else set()
    for path in (PRODUCT_BUILD_RECORD, f"{PRODUCT_RUN}/build.json"):
        record = _read(repo / path)
        fingerprints = record.get("fingerprints") if isinstance(record, dict) else None
        if isinstance(fingerprints, dict) and fingerprints.get("model") == model_fingerprint and model_fingerprint:
            accepted |= {fingerprints[k] for k in ("trained", "model") if isinstance(fingerprints.get(k), str)}
    return accepted


def mismatch(repo: Path, model: dict, build: dict | None = None) -> str | None:
    """Why a product record's model block ``model`` is not of the build ``build`` (read when not given), or None."""
    build = build or build_model(repo)
    accepted = product_fingerprints(repo, build["fingerprint"])
    if model.get("fingerprint") not in accepted:
        return f"fingerprint {model.get('fingerprint')}, the build record {PRODUCT_BUILD_RECORD} names " + " or ".join(
            sorted(accepted)
        )
    photo = build.get("photo_fingerprint")
    if photo and model.get("photo_fingerprint") not in (None, photo):
        return f"photo fingerprint {model.get('photo_fingerprint')}, the build record names {photo}"
    return None


def earlier_build(repo: Path, record: str) -> bool:
    """Whether ``record`` (a JSON file, or any JSON file under a folder) measured the product model of an earlier
    build than the build record's. False when the build record cannot tell (the records' test names that case)."""
    path = repo / record
    files = [path] if path.is_file() else sorted(path.rglob("*.json")) if path.is_dir() else []
    try:
        build = build_model(repo)
    except BuildRecordError:
        return False
    for f in files:
        if f.relative_to(repo).as_posix() == PRODUCT_BUILD_RECORD:
            continue
        data = _read(f)
        model = data.get("provenance", {}).get("model") if isinstance(data, dict) else None
        if isinstance(model, dict) and is_product_checkpoint(model.get("checkpoint")) and mismatch(repo, model, build):
            return True
    return False
