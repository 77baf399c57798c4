"""Writing a checkpoint's image encoder as ONNX (needs torch and onnx: ``pip install 'polyvse[train]'``).

The graph is the torch path of ``PolyvseModel.encode_image`` past the preprocessing: the checkpoint's extractor's
pooled features of each crop (``FeatureExtractor._pooled``: the frozen backbone, the map entering a fine-tuned
tail, or the fine-tuned whole backbone), the crops' mean, then ``JointEmbeddingModel.encode_image_features`` (tail,
head, joint space). ``polyvse.features.onnx_encoder`` runs it without torch.
"""

from __future__ import annotations

import copy
import os
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

from ..errors import CheckpointError
from ..util.atomic import write_json_atomic
from .onnx_encoder import ENCODER_FILE, ENCODER_META, FORMAT, image_weights_digest

__all__ = ["MIN_COSINE", "export_image_encoder"]

#: the lowest cosine between the graph's and the torch model's vector of a photo that an export may give
MIN_COSINE = 0.9999

#: ONNX operator set of the graph (ONNX Runtime 1.32 runs up to 23)
OPSET = 18


class _PixelsToJoint(nn.Module):
    """``(n, crops, 3, H, W)`` normalised crops -> ``(n, embed_dim)``: the extractor, the crops' mean, the model."""

    def __init__(self, extractor, model):
        super().__init__()
        self.backbone = extractor.model
        self._pooled = extractor._pooled  # bound to the extractor: it holds the cut / pooling logic
        self.dim = int(extractor.dim)
        self.model = model

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        n, crops = pixels.shape[0], pixels.shape[1]
        flat = pixels.reshape(n * crops, pixels.shape[2], pixels.shape[3], pixels.shape[4])
        feats = self._pooled(flat).reshape(n, crops, self.dim).mean(dim=1)
        return self.model.encode_image_features(feats)


def _extractor_of(ckpt):
    from .concat import ConcatExtractor
    from .whole import checkpoint_extractor

    ext = checkpoint_extractor(ckpt.backbone, ckpt.model, ten_crop=ckpt.ten_crop, squash=ckpt.squash_photos)
    if isinstance(ext, ConcatExtractor):
        raise CheckpointError(
            f"backbone {ckpt.backbone!r}: a concatenation of backbones has no single ONNX image "
            "encoder yet; embed its photos with torch (pip install 'polyvse[train]')"
        )
    ext.to(torch.device("cpu"), "fp32")
    if ext.square_key != ckpt.feature_key.removesuffix(".bf16"):
        raise CheckpointError(
            f"the checkpoint was trained on image features {ckpt.feature_key!r} but this "
            f"installation's {ckpt.backbone!r} extractor produces {ext.square_key!r}; use the same "
            "backbone, weights and crop setting"
        )
    return ext


def export_image_encoder(ckpt, folder: str | os.PathLike, weights: str | os.PathLike) -> Path:
    """Write ``image_encoder.onnx`` and ``image_encoder.json`` of the loaded checkpoint ``ckpt`` (a
    ``polyvse.model.checkpoint.Checkpoint``) into ``folder``; ``weights``: its saved model.safetensors, whose image
    tensors the graph is tied to (their digest). Each file is written to a temporary name and renamed."""
    folder = Path(folder)
    ext = _extractor_of(ckpt)
    model = copy.deepcopy(ckpt.model).to("cpu").eval()  # a copy: a model training on a GPU stays there
    wrapper = _PixelsToJoint(ext, model).eval()
    pre = ext.preprocess
    crops = 10 if ckpt.ten_crop else 1
    sample = torch.zeros(2, crops, 3, pre.crop, pre.crop)
    tmp = Path(tempfile.mkstemp(dir=folder, prefix=f".{ENCODER_FILE}.", suffix=".tmp")[1])
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # the tracer's notes on constants (the model's device moves, folded slices) are no user's concern
            warnings.simplefilter("ignore")
            # the TorchScript exporter: a graph of plain convolutions and matmuls that needs no onnxscript
            torch.onnx.export(
                wrapper,
                (sample,),
                str(tmp),
                input_names=["pixels"],
                output_names=["embedding"],
                dynamic_axes={"pixels": {0: "n"}, "embedding": {0: "n"}},
                opset_version=OPSET,
                dynamo=False,
                do_constant_folding=True,
            )
        os.replace(tmp, folder / ENCODER_FILE)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    meta = {
        "format": FORMAT,
        "input": "pixels",
        "output": "embedding",
        "opset": OPSET,
        "preprocess": {
            "resize": pre.resize,
            "crop": pre.crop,
            "mean": list(pre.mean),
            "std": list(pre.std),
            "interpolation": pre.interpolation,
            "ten_crop": bool(ckpt.ten_crop),
            "squash": bool(ckpt.squash_photos),
        },
        "backbone": ckpt.backbone,
        "feature_key": ckpt.feature_key,
        "embed_dim": int(model.config.embed_dim),
        "image_weights": image_weights_digest(weights),
        "torch": torch.__version__,
    }
    write_json_atomic(folder / ENCODER_META, meta)
    return folder / ENCODER_FILE
