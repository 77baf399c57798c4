"""Checkpoint folders: weights as safetensors + config JSON + training metadata, written atomically.

Layout of a checkpoint folder:
    model.safetensors   the weights
    config.json         format version, polyvse version, model config, caption encoder (tokenizer + vocabulary),
                        image features (backbone key, crop setting, whether its photos were squashed), languages
    training.json       data, split, seed, commit, metrics
A checkpoint that scores retrieval with CSLS (polyvse.csls.banks) also holds its banks: the training
photos' and captions' embeddings in the weights file (``hubness.*``), their sizes and k under config.json's
``retrieval``.
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
from typing import TYPE_CHECKING

from .._version import __version__
from ..errors import CheckpointError, DataError
from ..modules.config import PRETRAINED_CAPTIONS, ModelConfig
from ..modules.text_input import CaptionEncoder
from ..util.atomic import DiskFullError, atomic_open, disk_full_error, is_disk_full, write_json_atomic

if TYPE_CHECKING:  # torch is imported where weights are read or written, not to read a config
    from ..csls.banks import HubnessBanks
    from ..modules.joint import JointEmbeddingModel
    from ..modules.pretrained.captions import PretrainedCaptionEncoder

FORMAT_VERSION = 1
WEIGHTS = "model.safetensors"
CONFIG = "config.json"
TRAINING = "training.json"
#: names of the CSLS banks' tensors in the weights file (polyvse.csls.banks): hubness.photos and
#: hubness.captions.<lang>; written and read only through hubness_tensors / pop_hubness_banks below
HUBNESS_PREFIX = "hubness."
_HUBNESS_PHOTOS = HUBNESS_PREFIX + "photos"
_HUBNESS_CAPTIONS = HUBNESS_PREFIX + "captions."


def hubness_tensors(photos, captions: dict) -> dict:
    """The CSLS banks under their weights-file names (torch tensors or numpy arrays alike)."""
    return {_HUBNESS_PHOTOS: photos, **{_HUBNESS_CAPTIONS + lang: bank for lang, bank in captions.items()}}


def pop_hubness_banks(state: dict) -> tuple:
    """Pop every CSLS bank tensor from a weights dict (torch or numpy): (the photo bank or None, {lang: caption
    bank}); the banks are no model weights, so every reader takes them out before loading the rest."""
    banks = {k: state.pop(k) for k in [k for k in state if k.startswith(HUBNESS_PREFIX)]}
    captions = {k[len(_HUBNESS_CAPTIONS) :]: b for k, b in banks.items() if k.startswith(_HUBNESS_CAPTIONS)}
    return banks.get(_HUBNESS_PHOTOS), captions


#: safetensors' dtype names as numpy names them (how a bank held in memory names its dtype)
_NUMPY_DTYPES = {"F16": "float16", "F32": "float32", "F64": "float64", "BF16": "bfloat16"}


class HubnessBankFile:
    """The CSLS banks of a weights file read one at a time as asked for, as numpy arrays: ``photos()`` and
    ``caption(lang)`` (None for a language without a bank), ``languages``. A query reads the photo bank and its own
    language's; reading every language's with the weights would cost each fresh process far more than its query."""

    def __init__(self, weights: str | os.PathLike):
        from safetensors import safe_open

        self.path = str(weights)
        with safe_open(self.path, "np") as f:
            names = list(f.keys())
        if _HUBNESS_PHOTOS not in names:
            raise CheckpointError(
                f"{self.path}: config.json scores retrieval with CSLS but the photo bank is "
                "missing; the checkpoint is incomplete"
            )
        self.languages = sorted(k[len(_HUBNESS_CAPTIONS) :] for k in names if k.startswith(_HUBNESS_CAPTIONS))
        if not self.languages:
            raise CheckpointError(
                f"{self.path}: config.json scores retrieval with CSLS but it holds no caption "
                "bank; the checkpoint is incomplete"
            )

    def _read(self, name: str):
        from safetensors import safe_open

        with safe_open(self.path, "np") as f:
            return f.get_tensor(name)

    def photos(self):
        return self._read(_HUBNESS_PHOTOS)

    def caption(self, lang: str):
        return self._read(_HUBNESS_CAPTIONS + lang) if lang in self.languages else None

    def caption_shapes(self) -> dict[str, tuple[str, list[int]]]:
        """{language: (numpy dtype name, shape)} of each caption bank, from the file's header (no rows read)."""
        from safetensors import safe_open

        with safe_open(self.path, "np") as f:
            slices = {lang: f.get_slice(_HUBNESS_CAPTIONS + lang) for lang in self.languages}
            return {
                lang: (_NUMPY_DTYPES.get(s.get_dtype(), s.get_dtype()), list(s.get_shape()))
                for lang, s in slices.items()
            }


@dataclass
class Checkpoint:
    model: JointEmbeddingModel
    captions: CaptionEncoder | PretrainedCaptionEncoder
    backbone: str  # feature extractor name, e.g. "efficientnet-lite0"
    feature_key: str  # the extractor's key: backbone + weights + crop + preprocessing
    ten_crop: bool
    languages: list[str]
    training: dict = field(default_factory=dict)
    # trained on photos squashed to a square (f8k-full): other photos are squashed alike before the backbone
    squash_photos: bool = False
    # languages taught after training by `polyvse adapt` (polyvse.adaptation), also in `languages`:
    # {code: {"method", "pivot_lang", "lines", ...}}; their parts count in the model fingerprint, not in the photo
    # side's (polyvse.index.fingerprint)
    adapted_languages: dict = field(default_factory=dict)
    # tensors of adapted languages' parts that are not model parameters (a subword student's table and projection,
    # polyvse.model.subwords), named under their part's prefix; stored in the weights file beside the model's
    part_extras: dict = field(default_factory=dict)
    # retrieval scored with CSLS against these banks (polyvse.csls.banks); None: the model's similarity
    hubness: HubnessBanks | None = None

    @property
    def retrieval(self) -> dict:
        """config.json's ``retrieval``: how image-text retrieval is scored."""
        if self.hubness is None:
            return {"scoring": "similarity"}
        return {"scoring": "csls", **self.hubness.describe()}

    @property
    def config_dict(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "polyvse_version": __version__,
            "model": self.model.config.to_dict(),
            "captions": self.captions.to_dict(),
            "vocab_fingerprint": self.captions.fingerprint(),
            "image_features": {
                "backbone": self.backbone,
                "key": self.feature_key,
                "ten_crop": self.ten_crop,
                "squash": self.squash_photos,
            },
            "languages": list(self.languages),
            **({"adapted_languages": dict(self.adapted_languages)} if self.adapted_languages else {}),
            **({"retrieval": self.retrieval} if self.hubness is not None else {}),
        }


def save_checkpoint(ckpt: Checkpoint, path: str | os.PathLike, image_encoder: bool | str | os.PathLike = False) -> Path:
    """Write ``ckpt`` to the folder ``path`` (replaced whole, atomically), with its image encoder as ONNX
    (polyvse.features.onnx_encoder: what embeds photos in an install without torch) where one fits: the graph of
    the folder being replaced, or of the folder ``image_encoder`` names (the one ``ckpt`` was loaded from), is
    kept when it was exported from the same image weights; otherwise ``image_encoder`` True or a folder exports
    it (the trainer and ``polyvse adapt`` do), False leaves it out."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    state: dict = {}
    try:
        # on the CPU: a checkpoint written on a GPU loads anywhere (load_file reads onto the CPU)
        state = {k: v.detach().cpu().contiguous() for k, v in ckpt.model.state_dict().items()}
        state.update({k: v.detach().cpu().contiguous() for k, v in ckpt.part_extras.items()})
        if ckpt.hubness is not None:
            banks = hubness_tensors(ckpt.hubness.photos, ckpt.hubness.captions)
            state.update({k: v.detach().cpu().contiguous() for k, v in banks.items()})
        save_file(state, str(tmp / WEIGHTS), metadata={"format": "polyvse", "format_version": str(FORMAT_VERSION)})
        write_json_atomic(tmp / CONFIG, ckpt.config_dict)
        write_json_atomic(tmp / TRAINING, ckpt.training)
        _image_encoder(ckpt, tmp, path, image_encoder)
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, DiskFullError) or is_disk_full(exc, path.parent):  # named as the folder, not its temp
            needed = sum(v.numel() * v.element_size() for v in state.values()) or None
            raise disk_full_error(path, needed, kept="the checkpoint that was there is untouched") from exc
        raise
    return path


def _image_encoder(ckpt: Checkpoint, tmp: Path, path: Path, how) -> None:
    """The ONNX image encoder of the checkpoint being written to ``tmp`` (``save_checkpoint``'s ``image_encoder``):
    copied from the folder it replaces, or from the folder ``how`` names, where that one's was exported from the
    same image weights; else exported when ``how`` asks for one."""
    import warnings

    from ..features.onnx_encoder import ENCODER_FILE, ENCODER_META, has_encoder, image_weights_digest

    sources = [path] + ([Path(how)] if isinstance(how, (str, os.PathLike)) else [])
    digest = None
    for source in sources:
        if not has_encoder(source):
            continue
        try:
            digest = digest or image_weights_digest(tmp / WEIGHTS)
            same = json.loads((source / ENCODER_META).read_text(encoding="utf-8")).get("image_weights") == digest
        except (OSError, ValueError, CheckpointError):
            same = False
        if same:
            for name in (ENCODER_FILE, ENCODER_META):
                shutil.copyfile(source / name, tmp / name)
            return
    if how is False:
        return
    from ..features.onnx_export import export_image_encoder

    try:
        export_image_encoder(ckpt, tmp, tmp / WEIGHTS)
    except Exception as exc:  # noqa: BLE001 - the trained weights are saved whatever the exporter says
        warnings.warn(
            f"{path}: the checkpoint is saved without its ONNX image encoder ({type(exc).__name__}: "
            f"{exc}); an install without torch cannot embed its photos until `polyvse export onnx "
            f"--checkpoint {path}` writes it",
            stacklevel=3,
        )


@dataclass
class CheckpointConfig:
    """A checkpoint folder's config.json, checked and read without torch (what the numpy text path needs)."""

    path: Path
    config: dict
    model: ModelConfig
    captions: CaptionEncoder | PretrainedCaptionEncoder
    backbone: str
    feature_key: str
    ten_crop: bool
    languages: list[str]
    squash_photos: bool = False
    adapted_languages: dict = field(default_factory=dict)
    retrieval: dict = field(default_factory=dict)  # config.json's "retrieval" ({} = the model's similarity)

    @property
    def weights(self) -> Path:
        return self.path / WEIGHTS

    def training(self) -> dict:
        return (
            json.loads((self.path / TRAINING).read_text(encoding="utf-8")) if (self.path / TRAINING).is_file() else {}
        )


def read_checkpoint_config(path: str | os.PathLike) -> CheckpointConfig:
    """Check a checkpoint folder and read its config; a pretrained sentence encoder's captions load its backend."""
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
            from ..modules.pretrained.captions import PretrainedCaptionEncoder

            captions = PretrainedCaptionEncoder.from_dict(config["captions"], path)
        else:
            captions = CaptionEncoder.from_dict(config["captions"])
    except (DataError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{path / CONFIG}: unreadable caption encoder / vocabulary ({exc})") from exc
    if captions.fingerprint() != config.get("vocab_fingerprint"):
        raise CheckpointError(f"{path}: vocabulary does not match its fingerprint; the checkpoint is corrupt")
    model_cfg = ModelConfig(**config["model"])
    if captions.vocab is not None and model_cfg.vocab_size != len(captions.vocab):
        raise CheckpointError(
            f"{path}: model has {model_cfg.vocab_size} word ids, vocabulary has "
            f"{len(captions.vocab)}; the checkpoint is inconsistent"
        )
    feats = config["image_features"]
    squash = feats.get("squash")
    if squash is None:  # written before the field existed: the dataset it trained on says
        from ..data.registry import trained_on_squashed_photos

        try:
            dataset = json.loads((path / TRAINING).read_text(encoding="utf-8")).get("data")
        except (OSError, ValueError, AttributeError):
            dataset = None
        squash = trained_on_squashed_photos(dataset if isinstance(dataset, str) else None)
    return CheckpointConfig(
        path=path,
        config=config,
        model=model_cfg,
        captions=captions,
        backbone=feats["backbone"],
        feature_key=feats["key"],
        ten_crop=bool(feats["ten_crop"]),
        languages=list(config["languages"]),
        squash_photos=bool(squash),
        adapted_languages=dict(config.get("adapted_languages") or {}),
        retrieval=_retrieval(config, path),
    )


def _retrieval(config: dict, path: Path) -> dict:
    """config.json's ``retrieval`` checked: {} for the model's own similarity, else CSLS's section."""
    retrieval = config.get("retrieval")
    if retrieval is None or (isinstance(retrieval, dict) and retrieval.get("scoring") == "similarity"):
        return {}
    k = retrieval.get("k") if isinstance(retrieval, dict) else None
    ok = (
        isinstance(retrieval, dict)
        and retrieval.get("scoring") == "csls"
        and isinstance(k, int)
        and not isinstance(k, bool)
        and k >= 1
    )
    if not ok:
        raise CheckpointError(
            f"{path / CONFIG}: unreadable retrieval section {retrieval!r}; expected "
            "{'scoring': 'csls', 'k': <positive int>, ...}"
        )
    return dict(retrieval)


def is_pretrained_text(path: str | os.PathLike) -> bool:
    """Whether a checkpoint's text branch reads a frozen pretrained sentence encoder (from config.json alone)."""
    try:
        config = json.loads((Path(path) / CONFIG).read_text(encoding="utf-8"))
        return config["captions"].get("kind") == PRETRAINED_CAPTIONS
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False  # load_checkpoint / read_checkpoint_config say what is wrong with the folder


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    from safetensors.torch import load_file

    from ..modules.joint import JointEmbeddingModel

    cfg = read_checkpoint_config(path)
    model = JointEmbeddingModel(cfg.model)
    try:
        state = load_file(str(cfg.weights))
        extras = _part_extras(state, set(model.state_dict()), cfg.adapted_languages)
        hubness = _hubness(state, cfg)
        model.load_state_dict(state, strict=True)
    except CheckpointError:
        raise
    except Exception as exc:  # safetensors raises several types for truncated/corrupt files
        raise CheckpointError(f"{cfg.weights}: cannot load weights ({exc})") from exc
    model.eval()
    return Checkpoint(
        model=model,
        captions=cfg.captions,
        backbone=cfg.backbone,
        feature_key=cfg.feature_key,
        ten_crop=cfg.ten_crop,
        languages=cfg.languages,
        training=cfg.training(),
        squash_photos=cfg.squash_photos,
        adapted_languages=cfg.adapted_languages,
        part_extras=extras,
        hubness=hubness,
    )


def _hubness(state: dict, cfg: CheckpointConfig) -> HubnessBanks | None:
    """Pop the CSLS banks from ``state``; the banks when config.json's ``retrieval`` asks for CSLS."""
    from ..csls.banks import HubnessBanks

    photos, captions = pop_hubness_banks(state)
    if not cfg.retrieval:
        return None
    try:
        if photos is None:
            raise KeyError("no photo bank")
        return HubnessBanks(photos, captions, cfg.retrieval["k"], stored=True)
    except (KeyError, ValueError) as exc:
        raise CheckpointError(
            f"{cfg.weights}: config.json scores retrieval with CSLS but its banks do not load "
            f"({exc}); the checkpoint is incomplete"
        ) from exc


def _part_extras(state: dict, model_keys: set, adapted: dict) -> dict:
    """Pop from ``state`` the tensors of adapted languages' parts that the model does not hold (what
    ``Checkpoint.part_extras`` keeps); anything else unknown stays, for the strict load to name."""
    from .parts import part_key

    prefixes = tuple(part_key(lang) for lang in adapted)
    return {k: state.pop(k) for k in [k for k in state if k not in model_keys and prefixes and k.startswith(prefixes)]}


def save_training_state(state: dict, path: str | os.PathLike) -> None:
    """Full resumable state (model, optimiser, sampler position, RNG) via temp file + rename."""
    import torch

    with atomic_open(path, "wb", suffix=".tmp") as fh:
        torch.save(state, fh)


def load_training_state(path: str | os.PathLike) -> dict:
    """The saved state with every tensor on the CPU, wherever it was saved (the trainer copies the weights and
    the optimiser state onto its own device)."""
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)
