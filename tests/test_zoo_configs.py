"""Every config of the method zoo trains with --smoke on the real data and gives a loadable checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import polyvse
import polyvse_train.train as train_module
from polyvse_train.config import TrainConfig
from polyvse_train.train import train

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
#: the zoo's configs and the f8k-full ones (configs/overlays and configs/zoo hold no training config)
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml")) + sorted((CONFIG_DIR / "f8k-full").glob("*.yaml"))
IDS = [str(p.relative_to(CONFIG_DIR).with_suffix("")) for p in CONFIGS]


class _Guarded:
    """The run's objective, with ``Tensor.item()`` failing while its loss is computed."""

    def __init__(self, objective, inside: list):
        self._objective, self._inside = objective, inside

    def __call__(self, *args, **kwargs):
        self._inside.append(True)
        try:
            return self._objective(*args, **kwargs)
        finally:
            self._inside.pop()

    def __getattr__(self, name):
        return getattr(self._objective, name)


def forbid_item_in_losses(monkeypatch) -> list:
    """Make ``Tensor.item()`` fail inside an objective's loss: on a GPU each call waits for the device, so a loss
    part read every step stalls the loop (parts are returned detached; the epoch's mean loss is read once; the
    optimiser's own CPU step counter is not the objective's doing). Returns the steps taken."""
    steps, inside = [], []
    real_item, real_step = torch.Tensor.item, train_module.train_step

    def item(self):
        if inside:
            raise AssertionError("Tensor.item() inside an objective's loss: a device sync every step")
        return real_item(self)

    def step(run, batch):
        objective = run.objective
        run.objective = _Guarded(objective, inside)
        try:
            return real_step(run, batch)
        finally:
            run.objective = objective
            steps.append(run.step)

    monkeypatch.setattr(torch.Tensor, "item", item)
    monkeypatch.setattr(train_module, "train_step", step)
    return steps


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_config_smoke_trains_and_loads(path, shared_data, tmp_path, monkeypatch):
    cfg = TrainConfig.load(path)
    # a config is named by its file (f8k-full/x.yaml: f8k-full-x)
    assert cfg.name == (path.stem if path.parent == CONFIG_DIR else f"{path.parent.name}-{path.stem}")
    # a small slice, a few batches and narrower layers (same parts, objective and similarity): the whole
    # file stays within a few minutes on 2 shared cores. `polyvse train --smoke` runs the full widths.
    cfg.smoke.photos, cfg.smoke.epochs, cfg.smoke.max_batches = 24, 1, 2
    cfg.model.embed_dim, cfg.model.hidden_dim, cfg.model.word_dim, cfg.model.image_hidden_dim = 64, 64, 32, 64
    cfg.model.universal_dim = min(cfg.model.universal_dim, 32)
    steps = forbid_item_in_losses(monkeypatch)
    metrics = train(cfg, tmp_path, shared_data, smoke=True, progress=False)
    assert steps, "no training step ran"
    monkeypatch.undo()
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert set(saved["languages"]) == set(cfg.data.languages)
    for m in saved["languages"].values():
        assert m["n_images"] > 0 and 0 <= m["t2i_r1"] <= m["t2i_r10"] <= 100
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert log and all(r["loss"] is not None and r["loss"] == r["loss"] for r in log)  # trained, no NaN
    if cfg.align.uses_lexicon:
        assert set(metrics["alignment_ratio"]) == set(cfg.data.languages) - {cfg.align.pivot}
        assert "alignment_ratio" in log[-1]
    model = polyvse.load(tmp_path / "checkpoint")
    assert model.languages == list(cfg.data.languages)
    assert model.model.config.similarity == cfg.model.similarity
    for lang in cfg.data.languages:
        emb = model.encode_text(["a dog runs on the grass", "two people"], lang)
        assert emb.shape == (2, model.embed_dim) and (emb == emb).all()
