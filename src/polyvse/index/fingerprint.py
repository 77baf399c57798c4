"""A model's fingerprint: what an index records so that it refuses queries embedded by another model.

The fingerprint is a SHA-256 over what decides where a photo or a caption lands in the embedding space:
every weight tensor (dtype, shape, bytes), the similarity function, the vocabulary (its own fingerprint)
and tokenizer settings, the image backbone key and crop setting, the languages, and the model config.

It is meant to change exactly when the embeddings can change, not when the code around them evolves:
weights are hashed without their parameter names (a refactor that renames modules keeps the fingerprint),
and model-config fields that hold their default value are left out (fields added in later versions have
defaults that reproduce the earlier behaviour, so old checkpoints keep their fingerprint). Two loads of the
same checkpoint give the same fingerprint; a retrained, fine-tuned or otherwise different model another.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import weakref
from pathlib import Path

import numpy as np

_CACHE: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()


def similarity_name(model) -> str:
    """"cosine", "order", ... for a PolyvseModel or a TextQueryModel."""
    return model.similarity_name


def _config_without_defaults(config) -> dict:
    """Dataclass fields of a model config, leaving out those equal to their default."""
    if not dataclasses.is_dataclass(config):
        return dict(getattr(config, "__dict__", {}))
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            out[f.name] = value
            continue
        if value != default:
            out[f.name] = value
    return out


def model_fingerprint(model) -> str:
    """``sha256:<hex>`` identifying a model's embedding space (cached per model object).

    ``model``: a PolyvseModel, or a TextQueryModel (the numpy text path), which gives the same value for the
    same checkpoint: both hash the checkpoint's tensors (``weight_arrays()``) and its config.

    Computed once per model object: do not modify a model's weights in place after indexing with it.
    """
    cached = _CACHE.get(model)
    if cached is not None:
        return cached
    ck = model.checkpoint
    captions = model.captions
    # languages taught after training (polyvse adapt) move no photo and no other language: an index built before
    # serves the adapted model (their parts are also left out of weight_arrays)
    adapted = set(getattr(ck, "adapted_languages", None) or ())
    config = model.config
    if adapted:
        config = dataclasses.replace(config, languages=[x for x in config.languages if x not in adapted])
    described = {
        "model": _config_without_defaults(config),
        "similarity": similarity_name(model),
        "vocabulary": captions.fingerprint(),
        # a pretrained sentence encoder has no tokenizer settings of ours: its name, options and version
        "tokenizer": ({"max_len": captions.max_len, "lowercase": captions.lowercase} if captions.vocab is not None
                      else captions.to_dict()),
        "image_features": {"backbone": ck.backbone, "key": ck.feature_key, "ten_crop": bool(ck.ten_crop),
                           # only when on, so the fingerprints of every other model stay as they were
                           **({"squash": True} if ck.squash_photos else {})},
        "languages": [x for x in ck.languages if x not in adapted],
    }
    tensor_digests = _tensor_digests(model)
    h = hashlib.sha256(json.dumps(described, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
    for d in sorted(tensor_digests):
        h.update(d.encode())
    value = "sha256:" + h.hexdigest()
    try:
        _CACHE[model] = value
    except TypeError:  # an object that cannot be weakly referenced: just do not cache
        pass
    return value


def _tensor_digests(model) -> list[str]:
    """sha256 of each weight array the fingerprint covers. For a model read from a checkpoint folder (the numpy
    query models) they are kept under ``<cache>/fingerprints/``, keyed by the weights file's and config.json's path,
    size, modification time and inode (as git's index trusts a file's stat): a fresh `polyvse search` process then
    reads no weight it does not use (hashing the product's ~45 MB cost ~45 ms a query). A file written again gets a
    new modification time, so a new key."""
    key = _stat_key(model)
    path = None
    if key is not None:
        from ..util.paths import cache_root

        path = cache_root() / "fingerprints" / f"{key}.json"
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(cached, list) and all(isinstance(x, str) for x in cached):
                return cached
        except (OSError, ValueError):
            pass
    digests = []
    for array in model.weight_arrays():
        arr = np.ascontiguousarray(array)
        t = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
        t.update(arr.view(np.uint8).reshape(-1).data)
        digests.append(t.hexdigest())
    if path is not None:
        try:
            from ..util.atomic import write_json_atomic

            write_json_atomic(path, digests)
        except OSError:  # a read-only cache: computed again next time
            pass
    return digests


def _stat_key(model) -> str | None:
    folder = getattr(getattr(model, "checkpoint", None), "path", None)
    if folder is None or not hasattr(model.checkpoint, "weights"):
        return None
    try:
        stats = [(str(Path(f).resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
                 for f in (model.checkpoint.weights, Path(folder) / "config.json") for st in [os.stat(f)]]
    except OSError:
        return None
    return hashlib.sha256(json.dumps(["tensor-digests-1", stats]).encode()).hexdigest()[:32]


def short(fingerprint: str | None) -> str:
    """The first 12 hex digits, for messages."""
    if not fingerprint:
        return "?"
    return fingerprint.split(":", 1)[-1][:12]
