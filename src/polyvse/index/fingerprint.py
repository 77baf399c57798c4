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
import weakref

import numpy as np

_CACHE: "weakref.WeakKeyDictionary[object, str]" = weakref.WeakKeyDictionary()


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
    tensor_digests = []
    for array in model.weight_arrays():
        arr = np.ascontiguousarray(array)
        t = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
        t.update(arr.view(np.uint8).reshape(-1).data)
        tensor_digests.append(t.hexdigest())
    h = hashlib.sha256(json.dumps(described, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
    for d in sorted(tensor_digests):
        h.update(d.encode())
    value = "sha256:" + h.hexdigest()
    try:
        _CACHE[model] = value
    except TypeError:  # an object that cannot be weakly referenced: just do not cache
        pass
    return value


def short(fingerprint: str | None) -> str:
    """The first 12 hex digits, for messages."""
    if not fingerprint:
        return "?"
    return fingerprint.split(":", 1)[-1][:12]
