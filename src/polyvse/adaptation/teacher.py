"""Teacher learning of one new language's part (Multilingual-CLIP, Carlsson et al. 2022; what polyvse-best does
for Czech in training, ``polyvse_train.teacher``), after training, with everything else frozen.

The student is a new ``universal[lang]`` Linear, initialised from the zero-shot fallback part. For a pair (new
sentence, counterpart) the model's embedding of the counterpart in its own language, held fixed, is the target;
the new sentence's tower vector goes through the student and then the frozen shared head. InfoNCE over a batch
pulls each student embedding onto its own target and away from the others' (``mse_weight`` adds the squared
distance to the target, Multilingual-CLIP's loss). Only the student learns, so every old language's vectors and
every photo vector stay bit for bit what they were.

Each epoch draws its batches from ``(seed, epoch)`` and ends with the student scored on held-out pairs (translation
mR, ``held_out_mr``) and the whole state written atomically: a stopped run resumes after its last finished epoch
with the same batches, and the epoch that scored best on the held-out pairs is the one kept.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import CheckpointError
from ..losses import InfoNceLoss
from ..model.checkpoint import load_training_state, save_training_state
from ..model.zero_shot import encode_through_part
from ..util.progress import Progress
from .options import TeacherSettings

__all__ = ["TeacherSettings", "fit_teacher", "held_out_mr", "auto_epochs"]

TARGET_STEPS = 300  # auto epochs: at least this many optimiser steps, so 100 lines learn as much as 29k
MIN_EPOCHS, MAX_EPOCHS = 5, 100


def auto_epochs(n_train: int, batch_size: int) -> int:
    steps = max(1, math.ceil(n_train / batch_size))
    return int(min(MAX_EPOCHS, max(MIN_EPOCHS, math.ceil(TARGET_STEPS / steps))))


@torch.no_grad()
def held_out_mr(model, part: nn.Module, x: torch.Tensor, targets: torch.Tensor, texts=None) -> float:
    """Translation mR (R@1/5/10 both ways, percent) between the new sentences through ``part`` and their targets
    (``texts``: the sentences, for a subword student)."""
    from ..evaluation.retrieval import cross_lingual_retrieval

    emb = F.normalize(encode_through_part(model, x, part, texts), dim=-1)
    return float(cross_lingual_retrieval(emb.cpu(), targets.cpu())["mr"])


def _student(init: nn.Linear, settings: TeacherSettings) -> tuple[nn.Module, dict]:
    """The trainable student (a copy of ``init``, or a ``SubwordStudent`` around it) and its optimisers: Adam for
    the dense weights, sparse Adam for a subword table."""
    student, optimisers = copy.deepcopy(init), {}
    if settings.subwords:
        from ..model.subword_student import SubwordStudent
        from ..model.subwords import SubwordSpec

        student = SubwordStudent(
            student,
            SubwordSpec(settings.subword_buckets, settings.subword_dim, word_ngrams=settings.subword_word_ngrams),
            seed=settings.seed,
            dropout=settings.subword_dropout,
        )
        optimisers["table"] = torch.optim.SparseAdam(list(student.table.parameters()), lr=settings.subword_lr)
    student.train()
    for p in student.parameters():
        p.requires_grad_(True)
    dense = student.dense_parameters() if settings.subwords else list(student.parameters())
    return student, {"dense": torch.optim.Adam(dense, lr=settings.lr), **optimisers}


def fit_teacher(
    model,
    init: nn.Linear,
    x_train: torch.Tensor,
    t_train: torch.Tensor,
    x_val: torch.Tensor,
    t_val: torch.Tensor,
    settings: TeacherSettings,
    *,
    state_path: Path,
    identity: dict,
    resume: bool = False,
    progress: bool = True,
    desc: str = "teacher",
    texts_train=None,
    texts_val=None,
) -> tuple[nn.Module, dict]:
    """The student part learnt from ``init`` on (tower vectors ``x``, unit target embeddings ``t``); returns it and
    a report {epochs, best_epoch, history: [{epoch, loss, val_mr}]}. ``identity`` (what is taught, from what) must
    match a state being resumed. With ``settings.subwords`` the student is a ``SubwordStudent`` (the Linear from
    ``init`` plus a bag of hashed n-grams of the sentences ``texts_train`` / ``texts_val``)."""
    torch.manual_seed(settings.seed)
    model.eval()
    _set_trainable(model, False)
    if settings.subwords and (texts_train is None or texts_val is None):
        raise ValueError("a subword student reads the sentences: pass texts_train and texts_val")
    student, optimisers = _student(init, settings)
    if settings.subwords:
        student.remember(list(texts_train) + list(texts_val))
    batch = min(settings.batch_size, len(x_train))
    epochs = settings.epochs or auto_epochs(len(x_train), batch)
    identity = {**identity, "settings": asdict(settings), "epochs": epochs}
    best = {
        "epoch": 0,
        "val_mr": held_out_mr(model, student, x_val, t_val, texts_val) if len(x_val) else None,
        "student": copy.deepcopy(student.state_dict()),
    }
    history: list[dict] = []
    start = 1
    if resume and state_path.is_file():
        best, history, start = _resume(state_path, identity, student, optimisers)
    loss_fn = InfoNceLoss(settings.temperature)
    steps = math.ceil(len(x_train) / batch)
    with Progress(
        total=(epochs - start + 1) * steps, desc=desc, unit="step", enabled=progress, dynamic_ncols=True
    ) as bar:
        for epoch in range(start, epochs + 1):
            mean_loss = _epoch(
                model, student, optimisers, loss_fn, settings, epoch, batch, (x_train, t_train, texts_train), bar
            )
            val = held_out_mr(model, student, x_val, t_val, texts_val) if len(x_val) else None
            history.append({"epoch": epoch, "loss": mean_loss, "val_mr": val})
            if val is None or best["val_mr"] is None or val > best["val_mr"]:
                best = {"epoch": epoch, "val_mr": val, "student": copy.deepcopy(student.state_dict())}
            save_training_state(
                {
                    "identity": identity,
                    "epoch": epoch,
                    "student": student.state_dict(),
                    "optimizers": {n: o.state_dict() for n, o in optimisers.items()},
                    "best": best,
                    "history": history,
                },
                state_path,
            )
    _keep_best(student, best["student"], settings)
    return student, {"epochs": epochs, "best_epoch": best["epoch"], "history": history}


def _set_trainable(module: nn.Module, on: bool) -> None:
    for p in module.parameters():
        p.requires_grad_(on)


def _keep_best(student: nn.Module, state: dict, settings: TeacherSettings) -> None:
    """Put the best epoch's weights back and freeze the student for inference."""
    student.load_state_dict(state)
    if settings.subwords:
        student.forget()
    student.eval()
    _set_trainable(student, False)


def _resume(state_path: Path, identity: dict, student: nn.Module, optimisers: dict) -> tuple[dict, list, int]:
    """Load a stopped run's student and optimisers from ``state_path``; returns (best, history, next epoch)."""
    state = load_training_state(state_path)
    if state.get("identity") != identity:
        raise CheckpointError(
            f"{state_path}: a state of another adaptation (other file, checkpoint, language "
            "or settings); delete it, or run without --resume"
        )
    student.load_state_dict(state["student"])
    for name, opt in optimisers.items():
        opt.load_state_dict(state["optimizers"][name])
    return state["best"], state["history"], state["epoch"] + 1


def _epoch(
    model, student: nn.Module, optimisers: dict, loss_fn, settings: TeacherSettings, epoch: int, batch: int, train, bar
) -> float:
    """One pass over ``train`` (tower vectors, unit targets, sentences or None) in the batches drawn from
    (seed, epoch); returns the mean loss per step."""
    x_train, t_train, texts_train = train
    steps = math.ceil(len(x_train) / batch)
    order = np.random.default_rng([settings.seed, epoch]).permutation(len(x_train))
    if settings.subwords:  # the dropout draws of an epoch depend on (seed, epoch) only: exact resume
        student.drop_rng = np.random.default_rng([settings.seed, epoch, 1])
    total = 0.0
    for i in range(steps):
        rows = torch.from_numpy(order[i * batch : (i + 1) * batch])
        if len(rows) < 2:  # InfoNCE needs a negative
            continue
        texts = None if texts_train is None else [texts_train[int(r)] for r in rows]
        total += _step(model, student, optimisers, loss_fn, settings, x_train[rows], t_train[rows], texts)
        bar.update(1)
    return total / steps


def _step(
    model,
    student: nn.Module,
    optimisers: dict,
    loss_fn,
    settings: TeacherSettings,
    x: torch.Tensor,
    target: torch.Tensor,
    texts,
) -> float:
    """One optimiser step on a batch (tower vectors ``x``, unit targets); returns its loss."""
    out = encode_through_part(model, x, student, texts)
    target = target.to(out.device)
    loss = loss_fn(F.normalize(out, dim=-1) @ target.T)
    if settings.mse_weight:
        loss = loss + settings.mse_weight * F.mse_loss(F.normalize(out, dim=-1), target)
    for opt in optimisers.values():
        opt.zero_grad(set_to_none=True)
    loss.backward()
    for opt in optimisers.values():
        opt.step()
    return float(loss.detach())
