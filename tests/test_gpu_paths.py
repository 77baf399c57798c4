"""The training loop's GPU-only hazards, tested on the CPU: bf16 autocast (CPU autocast casts matmuls to bf16 as
CUDA's does) and a mocked torchrun process group."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from polyvse.distributed import DistInfo
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.text_input import CaptionEncoder
from polyvse.text.vocab import Vocabulary


def tiny_model(vocab_size: int) -> JointEmbeddingModel:
    return JointEmbeddingModel(
        ModelConfig(vocab_size=vocab_size, image_dim=8, embed_dim=6, word_dim=4, hidden_dim=5, text_encoder="mean")
    )


def tiny_data():
    vocab = Vocabulary.build([["en:a", "en:dog", "en:cat", "en:runs"]])
    train = SimpleNamespace(photo_row=np.array([0, 1, 2]), langs=["en"] * 3, ids=[[1, 2], [3], [2, 4]])
    return vocab, SimpleNamespace(features=torch.randn(3, 8), train=train, captions=CaptionEncoder(vocab))


def bf16_autocast():
    return torch.autocast(device_type="cpu", dtype=torch.bfloat16)


def test_vse_scores_stay_fp32_under_bf16_autocast():
    """InfoNCE divides the scores by t = 0.07: bf16 scores (3 significant digits) would move logits by ~0.05."""
    from polyvse_train.objectives.vse import batch_scores

    torch.manual_seed(0)
    vocab, data = tiny_data()
    model = tiny_model(len(vocab))
    with bf16_autocast():
        scores = batch_scores(model, model, data, [0, 1, 2], DistInfo())
        image, text = model(data.features, *data.captions.pad(data.train.ids))
    assert image.dtype == torch.bfloat16  # autocast is on: the embeddings are bf16
    assert scores.dtype == torch.float32
    torch.testing.assert_close(scores, model.scores(image.float(), text.float()))


def test_teacher_logits_stay_fp32_under_bf16_autocast():
    from polyvse_train.teacher import TeacherLoss, TeacherPairs

    vocab, data = tiny_data()
    model = tiny_model(len(vocab))
    pairs = TeacherPairs(student=[[1, 2], [3], [2, 4]], teacher=[[1], [3, 4], [2]], langs=["en"] * 3)
    teacher = TeacherLoss(pairs, batch_size=3, temperature=0.07, seed=0, teacher_language="en")
    seen = []
    inner = teacher.loss
    teacher.loss = lambda scores: seen.append(scores.dtype) or inner(scores)
    with bf16_autocast():
        loss = teacher(model, data.captions, 0, [0, 1, 2])
    assert seen == [torch.float32] and loss.dtype == torch.float32


def test_an_epoch_reads_its_loss_once_not_every_step(monkeypatch, tmp_path):
    """A loss read every step (.item()) makes the CPU wait for the GPU every step: the loop keeps the losses on the
    device and reads their mean once, at the end of the epoch (the log's loss is still the mean of the steps')."""
    import json

    from polyvse_train import train as train_mod

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    data = torch.randn(12, 3)
    step_losses = []

    class SquaredOutput(torch.nn.Module):
        pre_epochs = 0

        def forward(self, forward, batch, dist_info, epoch):
            loss = forward(data[batch]).pow(2).mean()
            step_losses.append(float(loss.detach()))  # the test's own account, outside the count below
            return loss, {}

        def start_epoch(self, epoch):
            pass

        def after_step(self, step):
            return {}

        def epoch_log(self):
            return {}

    schedule = SimpleNamespace(lr=0.1, lr_decay_epoch=10, grad_clip=1.0)
    run = SimpleNamespace(
        cfg=SimpleNamespace(schedule=schedule),
        objective=SquaredOutput(),
        alignment=None,
        epoch_log=lambda: {},
        model=model,
        forward=model,
        average=None,
        data=SimpleNamespace(features=data),
        optimiser=torch.optim.SGD(model.parameters(), lr=0.1),
        sampler=SimpleNamespace(epoch_batches=lambda epoch: [[i, i + 1] for i in range(0, 12, 2)]),
        epoch=0,
        epochs=1,
        batch_pos=0,
        step=0,
        smoke=False,
        progress=False,
        device=torch.device("cpu"),
        precision="fp32",
        dist_info=DistInfo(),
        out_dir=tmp_path,
        state_path=tmp_path / "state.pt",
        run_key={},
        time_spent=lambda: {"wall_s": 0.0, "cpu_s": 0.0, "processes": 1, "complete": True},
    )
    reads = []
    for name in ("item", "__float__"):
        real = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, real=real, name=name: reads.append(name) or real(self))
    train_mod.train_one_epoch(run)
    monkeypatch.undo()
    assert len(step_losses) == 6 and run.step == 6
    assert len(reads) - len(step_losses) == 1  # 6 steps, one read by the loop
    logged = json.loads((tmp_path / "train_log.jsonl").read_text())
    assert logged["loss"] == pytest.approx(np.mean(step_losses), rel=1e-6)


def test_the_teacher_term_goes_through_the_ddp_wrapper(monkeypatch):
    """Under DDP (mocked: 2 ranks, this one rank 0, the gather faked) the teacher pairs are embedded in the one pass
    through the wrapper, this rank's half of them, never by the bare model beside it."""
    from polyvse_train.config import TrainConfig
    from polyvse_train.objectives import build_objective, vse
    from polyvse_train.teacher import TeacherPairs

    torch.manual_seed(0)
    vocab, data = tiny_data()
    model = tiny_model(len(vocab))
    data.teacher = TeacherPairs(
        student=[[1, 2], [3], [2, 4], [4]], teacher=[[1], [3, 4], [2], [2, 3]], langs=["en"] * 4
    )
    cfg = TrainConfig(objective="vse", languages=["en"], embed_dim=6, word_dim=4, hidden_dim=5, teacher_batch_size=4)
    objective = build_objective(cfg, model, data)
    passes, bare = [], []

    class Wrapper(torch.nn.Module):  # stands in for DistributedDataParallel: counts the passes through it
        def __init__(self):
            super().__init__()
            self.module = model

        def forward(self, *args):
            passes.append(len(args[1]))
            return self.module(*args)

    inner = model.encode_text_ids
    monkeypatch.setattr(model, "encode_text_ids", lambda *a, **k: bare.append(1) or inner(*a, **k))
    # what the other rank would send: its slice of the rows, here copies of this rank's first rows
    monkeypatch.setattr(
        vse, "gather_with_grad", lambda x, info, sizes: torch.cat([x, x.detach()[: sizes[1]]]) if info.enabled else x
    )
    loss, parts = objective(Wrapper(), [0, 1, 2], DistInfo(rank=0, world_size=2), epoch=0)
    loss.backward()
    assert passes == [2 + 2 + 2]  # this rank's 2 captions, 2 student lines and their 2 teacher lines
    assert len(bare) == 1  # the wrapper's own pass, and none beside it
    assert parts["teacher"] > 0 and model.text_encoder.embed.weight.grad is not None


def test_the_photo_and_text_tails_train_under_bf16_autocast():
    """The trainable tails of polyvse-best (EfficientNet-Lite's last block on a cached map, e5's last layer on
    cached hidden states) take a step under bf16 autocast, as `--precision bf16` runs them on CUDA or a CPU:
    their weights and gradients stay fp32 and finite, and the outputs stay within bf16's reach of fp32's."""
    from polyvse.features.backbones import get_extractor
    from polyvse.modules.pretrained.e5.tail import TextTail

    torch.manual_seed(0)
    photo_tail = get_extractor("efficientnet-lite0:tail1").tail_module()
    maps = torch.randn(4, 192 * 7 * 7).clamp(min=0)
    text_tail = TextTail.from_file(1)
    states, lengths = torch.randn(3, 9, 384), torch.tensor([9, 5, 2])
    for tail, inputs in ((photo_tail, (maps,)), (text_tail, (states, lengths))):
        with torch.no_grad():
            want = tail(*inputs)
        with bf16_autocast():
            got = tail(*inputs)
            loss = got.float().square().sum()
        loss.backward()
        assert got.dtype in (torch.bfloat16, torch.float32) and torch.isfinite(got).all()
        cos = torch.nn.functional.cosine_similarity(got.float(), want, dim=-1)
        assert cos.min() > 0.99, f"{type(tail).__name__}: cosine {cos.min():.4f} to fp32 under bf16 autocast"
        grads = [p.grad for p in tail.parameters() if p.requires_grad]
        assert grads and all(g is not None and g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)


def test_the_text_tails_attention_runs_in_fp32_under_bf16_autocast(monkeypatch):
    """torch's CPU flash-attention backward is ~3x slower in bf16 than in fp32 at a caption batch's sizes, so the e5
    layer computes attention in fp32 under autocast (its projections and feed-forward still run in bf16)."""
    from polyvse.modules.pretrained.e5.tail import TextTail

    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def sdpa(q, k, v, **kw):
        seen.append((q.dtype, k.dtype, v.dtype, torch.is_autocast_enabled("cpu")))
        return real(q, k, v, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", sdpa)
    tail = TextTail.from_file(1)
    states, lengths = torch.randn(2, 5, 384), torch.tensor([5, 3])
    with torch.no_grad():
        want = tail(states, lengths)
        with bf16_autocast():
            got = tail(states, lengths)
    assert seen == [(torch.float32,) * 3 + (False,)] * 2
    assert torch.nn.functional.cosine_similarity(got.float(), want, dim=-1).min() > 0.99


@pytest.mark.parametrize("precision, autocast_on", [("fp32", False), ("bf16", True)])
def test_a_cpu_training_step_runs_its_objective_under_the_runs_precision(precision, autocast_on):
    """`polyvse train --precision bf16` on a CPU: the step's forward (the objective) runs under bf16 autocast; fp32
    runs it without; the optimiser steps either way."""
    from polyvse_train.train import train_step

    model = torch.nn.Linear(3, 2)
    seen = []

    class Objective:
        def __call__(self, forward, batch, dist_info, epoch):
            seen.append(torch.is_autocast_enabled("cpu"))
            return forward(batch).float().square().mean(), {}

        def after_step(self, step):
            pass

    run = SimpleNamespace(
        device=torch.device("cpu"),
        precision=precision,
        objective=Objective(),
        forward=model,
        dist_info=None,
        epoch=0,
        optimiser=torch.optim.SGD(model.parameters(), lr=0.1),
        cfg=SimpleNamespace(schedule=SimpleNamespace(grad_clip=0.0)),
        model=model,
        average=None,
        step=0,
        alignment=None,
    )
    before = model.weight.detach().clone()
    train_step(run, torch.ones(4, 3))
    assert seen == [autocast_on] and run.step == 1 and not torch.equal(before, model.weight)
