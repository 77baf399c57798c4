"""A model's fingerprints: what an index and a record name a model by.

``model_fingerprint`` is a SHA-256 over everything that decides where a photo or a caption lands in the embedding
space: every weight tensor (dtype, shape, bytes), the parts of languages taught after training by `polyvse adapt`
included, the similarity function, the vocabulary (its own fingerprint) and tokenizer settings, the image backbone
key and crop setting, the languages, the adapted languages' encoding settings (a subword student's) and the model
config. The trained checkpoint, an adapted one and two different adaptation runs each have their own.

``photo_fingerprint`` covers what decides where a *photo* lands: the image backbone key, crop and squash settings,
the similarity, the photo side's config (every model-config field but the text branch's) and every weight outside
the text encoder (image head, backbone tail). An index records both and checks the photo side
(``polyvse.index.store.index_accepts``): a checkpoint that only adds languages moves no photo, so an index built
before serves it, while a model whose photos land elsewhere is refused.

``legacy_fingerprint`` is the value indexes and records held before adapted parts counted (the full fingerprint
less adapted languages); an index manifest without ``photo_fingerprint`` is checked against it.

They are meant to change exactly when the embeddings can change, not when the code around them evolves: weights
are hashed without their parameter names (a refactor that renames modules keeps them), and model-config fields that
hold their default value are left out (fields added in later versions have defaults that reproduce the earlier
behaviour, so old checkpoints keep their fingerprints). A model without adapted languages has the same
``model_fingerprint`` as before adapted parts counted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

__all__ = ["legacy_fingerprint", "model_fingerprint", "photo_fingerprint", "short", "similarity_name"]

#: {model object: {kind: fingerprint}}
_CACHE: weakref.WeakKeyDictionary[object, dict] = weakref.WeakKeyDictionary()

#: state-dict prefix of the text branch; every other weight (image head, backbone tail) is the photo side's
TEXT_PREFIX = "text_encoder."
#: model-config fields only the text branch reads (the rest decide where a photo lands too)
TEXT_CONFIG_FIELDS = frozenset(
    {
        "vocab_size",
        "word_dim",
        "hidden_dim",
        "num_layers",
        "bidirectional",
        "dropout",
        "text_encoder",
        "text_sharing",
        "languages",
        "universal_dim",
        "pretrained_dim",
        "text_head",
        "pretrained_towers",
        "tower_dropout",
        "language_map",
        "text_tail_layers",
    }
)


def similarity_name(model) -> str:
    """ "cosine", "order", ... for a PolyvseModel or a TextQueryModel."""
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


def _adapted(model) -> dict:
    return dict(getattr(model.checkpoint, "adapted_languages", None) or {})


def _part_prefixes(langs: Iterable[str]) -> tuple[str, ...]:
    from ..model.parts import part_key

    return tuple(part_key(lang) for lang in langs)


def _image_features(ck) -> dict:
    # squash only when on, so the fingerprints of every other model stay as they were
    return {
        "backbone": ck.backbone,
        "key": ck.feature_key,
        "ten_crop": bool(ck.ten_crop),
        **({"squash": True} if ck.squash_photos else {}),
    }


def _both_sides(model, leave_out: set) -> dict:
    """What the full (and the legacy) fingerprint describe besides weights; ``leave_out``: adapted languages."""
    ck, captions, config = model.checkpoint, model.captions, model.config
    if leave_out:
        config = dataclasses.replace(config, languages=[x for x in config.languages if x not in leave_out])
    return {
        "model": _config_without_defaults(config),
        "similarity": similarity_name(model),
        "vocabulary": captions.fingerprint(),
        # a pretrained sentence encoder has no tokenizer settings of ours: its name, options and version
        "tokenizer": (
            {"max_len": captions.max_len, "lowercase": captions.lowercase}
            if captions.vocab is not None
            else captions.to_dict()
        ),
        "image_features": _image_features(ck),
        "languages": [x for x in ck.languages if x not in leave_out],
    }


def _fingerprint(model, kind: str, described: dict, covers: Callable[[str], bool]) -> str:
    cached = _CACHE.get(model)
    if cached is not None and kind in cached:
        return cached[kind]
    h = hashlib.sha256(json.dumps(described, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
    for d in sorted(_tensor_digests(model, covers)):
        h.update(d.encode())
    value = "sha256:" + h.hexdigest()
    try:
        _CACHE.setdefault(model, {})[kind] = value
    except TypeError:  # an object that cannot be weakly referenced: just do not cache
        pass
    return value


def model_fingerprint(model) -> str:
    """``sha256:<hex>`` identifying a model's whole embedding space, every part included (cached per model object).

    ``model``: a PolyvseModel, or a numpy query model (TextQueryModel, TowerQueryModel), which gives the same value
    for the same checkpoint: both hash the checkpoint's tensors (``named_weights()``) and its config.

    Computed once per model object: do not modify a model's weights in place after indexing with it.
    """
    adapted = _adapted(model)
    described = _both_sides(model, set())
    if adapted:  # absent otherwise: a model without adapted languages keeps its fingerprint of before
        described["adapted"] = {lang: (record or {}).get("subwords") for lang, record in sorted(adapted.items())}
    return _fingerprint(model, "model", described, lambda name: True)


def legacy_fingerprint(model) -> str:
    """The fingerprint as it was before adapted languages counted: ``model_fingerprint`` less the adapted languages
    and their parts. What index manifests without ``photo_fingerprint`` and older records hold."""
    adapted = set(_adapted(model))
    if not adapted:
        return model_fingerprint(model)
    prefixes = _part_prefixes(adapted)
    return _fingerprint(model, "legacy", _both_sides(model, adapted), lambda name: not name.startswith(prefixes))


def photo_fingerprint(model) -> str:
    """``sha256:<hex>`` of what decides where a photo lands (module docstring): equal for a checkpoint and the same
    checkpoint with languages added or its text branch retrained, different when the image side changes."""
    config = {k: v for k, v in _config_without_defaults(model.config).items() if k not in TEXT_CONFIG_FIELDS}
    described = {
        "photo-side": 1,
        "model": config,
        "similarity": similarity_name(model),
        "image_features": _image_features(model.checkpoint),
    }
    return _fingerprint(model, "photo", described, lambda name: not name.startswith(TEXT_PREFIX))


def _tensor_digests(model, covers: Callable[[str], bool]) -> list[str]:
    """sha256 of each weight the fingerprint covers (``covers(name)``). For a model read from a checkpoint folder
    (the numpy query models) they are kept under ``<cache>/fingerprints/`` by name, keyed by the weights file's and
    config.json's path, size, modification time and inode (as git's index trusts a file's stat): a fresh `polyvse
    search` process then reads no weight for its index's check, and a cold one reads only the weights the check
    covers (an adapted language's subword table is 32 MiB). A file written again gets a new modification time, so a
    new key."""
    weights = model.named_weights()
    names = [name for name in weights if covers(name)]
    key = _stat_key(model)
    path, known = None, {}
    if key is not None:
        from ..util.paths import cache_root

        path = cache_root() / "fingerprints" / f"{key}.json"
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(cached, dict) and all(isinstance(v, str) for v in cached.values()):
                known = cached
        except (OSError, ValueError):
            pass
    fresh = {name: _digest(weights[name]) for name in names if name not in known}
    if fresh and path is not None:
        try:
            from ..util.atomic import write_json_atomic

            write_json_atomic(path, {**known, **fresh})
        except OSError:  # a read-only cache: computed again next time
            pass
    return [fresh[name] if name in fresh else known[name] for name in names]


def _digest(array) -> str:
    if hasattr(array, "detach"):  # a torch tensor
        array = array.detach().cpu().numpy()
    arr = np.ascontiguousarray(array)
    t = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    t.update(arr.view(np.uint8).reshape(-1).data)
    return t.hexdigest()


def _stat_key(model) -> str | None:
    folder = getattr(getattr(model, "checkpoint", None), "path", None)
    if folder is None or not hasattr(model.checkpoint, "weights"):
        return None
    try:
        stats = [
            (str(Path(f).resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
            for f in (model.checkpoint.weights, Path(folder) / "config.json")
            for st in [os.stat(f)]
        ]
    except OSError:
        return None
    return hashlib.sha256(json.dumps(["tensor-digests-by-name-1", stats]).encode()).hexdigest()[:32]


def short(fingerprint: str | None) -> str:
    """The first 12 hex digits, for messages."""
    if not fingerprint:
        return "?"
    return fingerprint.split(":", 1)[-1][:12]
