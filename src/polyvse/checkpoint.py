"""Checkpoint folders: weights as safetensors + config JSON + training metadata, written atomically.

Layout of a checkpoint folder:
    model.safetensors   the weights
    config.json         format version, polyvse version, model config, caption encoder (tokenizer + vocabulary),
                        image features (backbone key, crop setting), languages
    training.json       data, split, seed, commit, metrics
A save goes to a sibling temporary folder that is renamed into place only when complete, so a killed save
never leaves a folder that loads.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ._version import __version__
from .atomic import atomic_open, write_json_atomic
from .errors import CheckpointError, DataError
from .models.joint import JointEmbeddingModel, ModelConfig
from .models.pretrained.captions import KIND as PRETRAINED_CAPTIONS, PretrainedCaptionEncoder
from .models.text_input import CaptionEncoder

FORMAT_VERSION = 1
WEIGHTS = "model.safetensors"
CONFIG = "config.json"
TRAINING = "training.json"


@dataclass
class Checkpoint:
    model: JointEmbeddingModel
    captions: CaptionEncoder | PretrainedCaptionEncoder
    backbone: str  # feature extractor name, e.g. "efficientnet-lite0"
    feature_key: str  # the extractor's key: backbone + weights + crop + preprocessing
    ten_crop: bool
    languages: list[str]
    training: dict = field(default_factory=dict)

    @property
    def config_dict(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "polyvse_version": __version__,
            "model": self.model.config.to_dict(),
            "captions": self.captions.to_dict(),
            "vocab_fingerprint": self.captions.fingerprint(),
            "image_features": {"backbone": self.backbone, "key": self.feature_key, "ten_crop": self.ten_crop},
            "languages": list(self.languages),
        }


def save_checkpoint(ckpt: Checkpoint, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        # on the CPU: a checkpoint written on a GPU loads anywhere (load_file reads onto the CPU)
        state = {k: v.detach().cpu().contiguous() for k, v in ckpt.model.state_dict().items()}
        save_file(state, str(tmp / WEIGHTS), metadata={"format": "polyvse", "format_version": str(FORMAT_VERSION)})
        write_json_atomic(tmp / CONFIG, ckpt.config_dict)
        write_json_atomic(tmp / TRAINING, ckpt.training)
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: no checkpoint folder here (expected {WEIGHTS}, {CONFIG}, {TRAINING})")
    for name in (WEIGHTS, CONFIG):
        if not (path / name).is_file():
            raise CheckpointError(f"{path}: missing {name}; the folder is not a complete polyvse checkpoint")
    try:
        config = json.loads((path / CONFIG).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path / CONFIG}: unreadable config ({exc})") from exc
    version = config.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {version!r}, this polyvse ({__version__}) reads version "
            f"{FORMAT_VERSION}; re-export it with a matching polyvse"
        )
    try:
        if config["captions"].get("kind") == PRETRAINED_CAPTIONS:  # frozen sentence encoder + learned head
            captions = PretrainedCaptionEncoder.from_dict(config["captions"], path)
        else:
            captions = CaptionEncoder.from_dict(config["captions"])
    except (DataError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{path / CONFIG}: unreadable caption encoder / vocabulary ({exc})") from exc
    if captions.fingerprint() != config.get("vocab_fingerprint"):
        raise CheckpointError(f"{path}: vocabulary does not match its fingerprint; the checkpoint is corrupt")
    model_cfg = ModelConfig(**config["model"])
    if captions.vocab is not None and model_cfg.vocab_size != len(captions.vocab):
        raise CheckpointError(f"{path}: model has {model_cfg.vocab_size} word ids, vocabulary has "
                              f"{len(captions.vocab)}; the checkpoint is inconsistent")
    model = JointEmbeddingModel(model_cfg)
    try:
        state = load_file(str(path / WEIGHTS))
        model.load_state_dict(state, strict=True)
    except Exception as exc:  # safetensors raises several types for truncated/corrupt files
        raise CheckpointError(f"{path / WEIGHTS}: cannot load weights ({exc})") from exc
    model.eval()
    training = {}
    if (path / TRAINING).is_file():
        training = json.loads((path / TRAINING).read_text(encoding="utf-8"))
    feats = config["image_features"]
    return Checkpoint(model=model, captions=captions, backbone=feats["backbone"], feature_key=feats["key"],
                      ten_crop=bool(feats["ten_crop"]), languages=list(config["languages"]), training=training)


def save_training_state(state: dict, path: str | os.PathLike) -> None:
    """Full resumable state (model, optimiser, sampler position, RNG) via temp file + rename."""
    with atomic_open(path, "wb", suffix=".tmp") as fh:
        torch.save(state, fh)


def load_training_state(path: str | os.PathLike) -> dict:
    """The saved state with every tensor on the CPU, wherever it was saved (the trainer copies the weights and
    the optimiser state onto its own device)."""
    return torch.load(path, map_location="cpu", weights_only=False)
