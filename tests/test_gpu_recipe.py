"""The GPU recipe (configs/gpu/): it loads and validates, and on the CPU, shrunk by a test overlay (the smallest
backbone, a handful of photos, tiny batches), it builds the model, trains a step in which the whole image backbone
and every layer of the e5 tower move, and its checkpoint embeds photos through the fine-tuned backbone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import polyvse
from polyvse.features.backbones import get_extractor
from polyvse.features.tail import whole_of
from polyvse.modules.pretrained.e5.tail import TextTail
from polyvse_train.config import TrainConfig
from polyvse_train.train import train
from test_zoo_configs import forbid_item_in_losses

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "gpu" / "polyvse-full-finetune.yaml"
#: the recipe shrunk to a CPU test: the same parts (whole Lite backbone on the pixel path, 12 e5 layers, fused
#: towers, teacher learning, InfoNCE), the smallest backbone, 8 photos, one step of 4 captions, narrow heads
CPU_OVERLAY = {
    "data.backbone": "efficientnet-lite0",
    "smoke": {"photos": 8, "epochs": 1, "max_batches": 1},
    "schedule.batch_size": 4,
    "objective.vse.teacher_batch_size": 4,
    "model.embed_dim": 32,
    "model.universal_dim": 16,
    "schedule.threads": 1,
}


def test_the_recipe_loads_and_validates():
    cfg = TrainConfig.load(RECIPE)
    assert cfg.name == "gpu-polyvse-full-finetune"
    assert cfg.model.finetune_backbone and cfg.model.finetune_blocks == 0 and cfg.model.text_finetune_layers == 12
    assert (cfg.data.dataset, cfg.data.backbone, cfg.data.eval_split) == ("f8k-full", "efficientnet-lite2", "val")
    assert cfg.model.pretrained_encoder == "e5-small+use-multilingual" and cfg.objective.teacher_students == ["cs"]
    assert cfg.schedule.batch_size == 256 and cfg.schedule.finetune_lr_scale == cfg.schedule.text_finetune_lr_scale


def test_the_recipe_trains_a_step_on_the_cpu_and_its_checkpoint_embeds_through_the_trained_backbone(
    shared_data, tmp_path, monkeypatch
):
    cfg = TrainConfig.load(RECIPE).with_overrides(CPU_OVERLAY, "test overlay")
    steps = forbid_item_in_losses(monkeypatch)  # no per-step device sync on a GPU
    metrics = train(cfg, tmp_path, shared_data, smoke=True, progress=False)
    monkeypatch.undo()
    assert steps == [1] and set(metrics["languages"]) == set(cfg.data.languages)
    model = polyvse.load(tmp_path / "checkpoint", device="cpu")
    lite0 = get_extractor("efficientnet-lite0")
    start = whole_of(lite0.model, (3, 224, 224)).state_dict()
    trained = model.model.image_tail.state_dict()
    assert not torch.allclose(trained["stem.weight"], start["stem.weight"]), "the backbone's stem stayed frozen"
    text_start, text_trained = TextTail.from_file(12).state_dict(), model.model.text_encoder.tail.state_dict()
    for layer in range(12):
        names = [k for k in text_start if k.startswith(f"layers.{layer}.")]
        assert any(not torch.equal(text_trained[k], text_start[k]) for k in names), f"e5 layer {layer} stayed frozen"
    photo = sorted((shared_data / "flickr8k-224" / "images").glob("*.jpg"))[0]
    with torch.no_grad():
        pixels = lite0.transform(polyvse.features.load_image(photo))[None]
        expected = model.model.image_head(model.model.image_tail(pixels)).numpy()
    np.testing.assert_allclose(model.encode_image([photo]), expected, atol=1e-4)
    assert model.encode_text(["zwei Hunde spielen im Schnee"], lang="de").shape == (1, 32)
