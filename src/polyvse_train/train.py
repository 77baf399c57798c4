"""The training loop: prepared data (``data.py``) -> joint model -> checkpoint -> per-language evaluation.

Resumable: the full state (model, optimiser, epoch and batch position of the sampler, RNG states) is written
atomically after every epoch (and every `save_every` steps); `resume=True` continues from it and reaches the
same final metrics as an uninterrupted run with the same seed, because the sampler's batch order depends only
on (seed, epoch).
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from polyvse.data.registry import trained_on_squashed_photos
from polyvse.device import autocast
from polyvse.distributed import DistInfo, barrier, init_distributed, shutdown
from polyvse.errors import DataError
from polyvse.model.checkpoint import (
    TRAINING,
    Checkpoint,
    load_training_state,
    save_checkpoint,
    save_training_state,
    write_json_atomic,
)
from polyvse.model.torch_model import PolyvseModel
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.provenance import checkpoint_model, git_state, provenance
from polyvse.util.progress import Progress

from .config import TrainConfig, changed_fields
from .csls_banks import split_features, training_banks
from .data import CaptionSet, PreparedData, feature_backbone, prepare_data
from .objectives import build_objective
from .objectives.word_alignment import WordAlignment, build_alignment, prepare_word_embeddings
from .photo_views import PhotoViews
from .pixels import FixedPhotoBatch, PhotoPixels
from .pretrained_tower import uses_pretrained_tower
from .weight_average import WeightAverage

log = logging.getLogger("polyvse.train")
STATE = "state.pt"


class TrainingStateMismatch(DataError):
    """The training state in the output folder was written for another config, data or vocabulary."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def build_model(cfg: TrainConfig, data: PreparedData) -> JointEmbeddingModel:
    model = _joint_model(cfg, data)
    if data.image_tail is not None:  # the tail starts from the ImageNet weights
        model.image_tail.load_state_dict(data.image_tail.state_dict())
    return model


def _joint_model(cfg: TrainConfig, data: PreparedData) -> JointEmbeddingModel:
    per_language = cfg.model.text_sharing != "shared" or cfg.model.universal_dim > 0 or bool(cfg.model.language_map)
    return JointEmbeddingModel(
        ModelConfig(
            image_tail=feature_backbone(cfg) if data.image_tail is not None else "",
            image_tail_shape=list(data.image_tail.in_shape) if data.image_tail is not None else [],
            vocab_size=vocab_size(data.captions),
            image_dim=data.image_dim,
            embed_dim=cfg.model.embed_dim,
            pretrained_dim=data.captions.dim if uses_pretrained_tower(cfg) else 0,
            pretrained_towers=data.captions.tower_dims if uses_pretrained_tower(cfg) else [],
            tower_dropout=cfg.model.tower_dropout,
            text_tail_layers=cfg.model.text_finetune_layers,
            word_dim=cfg.model.word_dim,
            hidden_dim=cfg.model.hidden_dim,
            dropout=cfg.model.dropout,
            similarity=cfg.model.similarity,
            languages=list(cfg.data.languages) if per_language else [],
            **{k: getattr(cfg.model, k) for k in MODEL_FIELDS},
        )
    )


#: TrainConfig fields that are ModelConfig fields of the same name
MODEL_FIELDS = (
    "text_encoder",
    "text_sharing",
    "universal_dim",
    "image_head",
    "image_hidden_dim",
    "language_map",
    "text_head",
)


def vocab_size(captions) -> int:
    """Word ids of the caption encoder (0 for a pretrained sentence encoder, which has no vocabulary)."""
    return len(captions.vocab) if captions.vocab is not None else 0


def evaluate_split(
    model: PolyvseModel, data: PreparedData, caps: CaptionSet, rows: np.ndarray, languages: list[str]
) -> dict:
    from polyvse.evaluation.retrieval import RetrievalEvaluator

    local = {r: i for i, r in enumerate(rows)}
    keep = [i for i, r in enumerate(caps.photo_row) if r in local]
    feats = split_features(model, data, rows)
    return RetrievalEvaluator.on_features(
        feats,
        [caps.ids[i] for i in keep],
        np.array([local[caps.photo_row[i]] for i in keep], dtype=np.int64),
        [caps.langs[i] for i in keep],
        languages,
    )(model)["languages"]


def build_optimiser(cfg: TrainConfig, model: torch.nn.Module, extra=()) -> torch.optim.Optimizer:
    """One parameter group at lr; a backbone tail's parameters in a second one at finetune_lr_scale x lr, an e5
    tail's in a third at text_finetune_lr_scale x lr (each group's ``lr_scale`` is kept so the schedule can set lr
    without losing it)."""
    tails = [
        ([p for n, p in model.named_parameters() if n.startswith(prefix)], scale)
        for prefix, scale in (
            ("image_tail.", cfg.schedule.finetune_lr_scale),
            ("text_encoder.tail.", cfg.schedule.text_finetune_lr_scale),
        )
    ]
    in_tail = {id(p) for tail, _ in tails for p in tail}
    params = [p for p in model.parameters() if p.requires_grad and id(p) not in in_tail] + list(extra)
    groups = [{"params": params, "lr_scale": 1.0}]
    groups += [{"params": tail, "lr_scale": scale} for tail, scale in tails if tail]
    optimiser = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}[cfg.schedule.optimizer]  # config.OPTIMIZERS
    return optimiser([{**g, "lr": cfg.schedule.lr * g["lr_scale"]} for g in groups], lr=cfg.schedule.lr)


def batch_items(batch) -> int:
    """Captions in a batch: a list of caption indices (vse) or (photo rows, slots) with -1 for empty slots."""
    if isinstance(batch, tuple):
        text_batches = batch[2] if len(batch) > 2 else []  # text-only tuple batches it carries (text_corpus)
        return int((np.asarray(batch[1]) >= 0).sum()) + sum(int((t >= 0).sum()) for t in text_batches)
    return len(batch)


def git_commit() -> str | None:
    """The commit of the code this process runs (polyvse.provenance)."""
    return git_state()["commit"]


def train(
    cfg: TrainConfig,
    out_dir: str | Path,
    root: Path,
    *,
    resume: bool = False,
    smoke: bool = False,
    save_every: int = 0,
    progress: bool = True,
    max_steps: int | None = None,
    device: str = "auto",
    precision: str = "fp32",
    dist_timeout_min: float | None = None,
) -> dict:
    """Train, checkpoint and evaluate; returns the metrics dict also written to out_dir/metrics.json.

    max_steps stops after that many optimisation steps (state saved), for tests of resumption. Under torchrun
    every rank runs this; rank 0 alone writes state, checkpoint and metrics. ``device``: auto | cpu | cuda |
    cuda:N (under torchrun auto and cuda mean this rank's GPU, cuda:$LOCAL_RANK); ``precision``: fp32 | bf16 | auto
    (autocast of the training steps, on CUDA or the CPU; evaluation and features stay fp32). Neither is part of
    the run's identity: a state saved on a GPU resumes on a CPU.
    ``dist_timeout_min``: under torchrun, how long a rank waits for the others
    (``polyvse.distributed.init_distributed``).
    """
    from polyvse.device import resolve_device, training_precision

    cfg.validate()
    run_on = resolve_device(device)
    precision = training_precision(precision, run_on)  # auto -> what this machine computes natively
    dist_info = init_distributed(run_on, dist_timeout_min)
    try:
        return _train(
            cfg,
            Path(out_dir),
            root,
            dist_info,
            resume=resume,
            smoke=smoke,
            save_every=save_every,
            progress=progress,
            max_steps=max_steps,
            device=run_on,
            precision=precision,
        )
    finally:
        shutdown(dist_info)


def rng_state(device: torch.device) -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if device.type == "cuda":  # dropout on a GPU draws from its own generator
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict, device: torch.device) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and "cuda" in state:  # a state saved on a CPU has none: the GPU keeps its seed
        torch.cuda.set_rng_state(state["cuda"], device)


@dataclass
class TrainingRun:
    """What the loop carries from setup to finish: the run's parts and its position (epoch, batch, step)."""

    cfg: TrainConfig
    out_dir: Path
    dist_info: DistInfo
    smoke: bool
    progress: bool
    t0: float
    data: PreparedData
    model: JointEmbeddingModel
    forward: torch.nn.Module  # the model, or its DDP wrapper
    objective: torch.nn.Module
    alignment: WordAlignment | None  # AME's word alignment beside the objective (the align: section), or None
    optimiser: torch.optim.Optimizer
    sampler: object
    epochs: int  # pre-epochs (MULE's LP, the Translator's source stage) + the schedule's epochs
    run_key: dict
    device: torch.device
    precision: str  # fp32 | bf16 (autocast of the training steps, CUDA or CPU)
    commit: str | None  # the code this process runs, read when it starts: HEAD may move while a long run trains
    tree: dict  # polyvse.provenance.git_state() when it started (commit, dirty), for the records' provenance
    epoch: int = 0
    batch_pos: int = 0
    step: int = 0
    # time spent by the earlier processes of a resumed run (from the training state), so that the log and
    # metrics.json count the whole run, not only its last process
    spent: dict = field(
        default_factory=lambda: {"wall_s": 0.0, "cpu_s": 0.0, "processes": 0, "complete": True, "threads": []}
    )
    cpu0: float = 0.0  # this process's CPU time (time.process_time) when the run started in it
    average: WeightAverage | None = None  # schedule.ema_decay > 0: the moving average of the weights

    @property
    def state_path(self) -> Path:
        return self.out_dir / STATE

    def epoch_log(self) -> dict:
        """What the objective and the word alignment add to an epoch's log line (and to metrics.json)."""
        return {**self.objective.epoch_log(), **(self.alignment.log() if self.alignment is not None else {})}

    def time_spent(self) -> dict:
        """Wall and CPU seconds of the whole run so far, over every process that trained it (``complete``: false
        when a state of older code did not say what its processes spent)."""
        # the threads each process trained at (torch's, which --set threads=N sets); None: a process of older code
        earlier = self.spent.get("threads") or [None] * self.spent["processes"]
        return {
            "wall_s": round(self.spent["wall_s"] + time.time() - self.t0, 1),
            "cpu_s": round(self.spent["cpu_s"] + time.process_time() - self.cpu0, 1),
            "processes": self.spent["processes"] + 1,
            "complete": self.spent["complete"],
            "threads": [*earlier, torch.get_num_threads()],
        }


def _train(
    cfg: TrainConfig,
    out_dir: Path,
    root: Path,
    dist_info: DistInfo,
    *,
    resume: bool,
    smoke: bool,
    save_every: int,
    progress: bool,
    max_steps: int | None,
    device: torch.device,
    precision: str,
) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    # Under torchrun the cores are shared between ranks.
    torch.set_num_threads(max(1, cfg.schedule.threads // dist_info.world_size))
    run = setup_run(
        cfg,
        out_dir,
        root,
        dist_info,
        smoke=smoke,
        progress=progress and dist_info.is_main,
        device=device,
        precision=precision,
    )
    if resume:
        resume_run(run)
    stopped = False
    while run.epoch < run.epochs and not stopped:
        stopped = train_one_epoch(run, save_every=save_every, max_steps=max_steps)
    barrier(dist_info)
    if stopped and run.epoch < run.epochs:
        return {"stopped_at_step": run.step}
    if not dist_info.is_main:
        return {"rank": dist_info.rank}
    return finish_run(run)


def setup_run(
    cfg: TrainConfig,
    out_dir: Path,
    root: Path,
    dist_info: DistInfo,
    *,
    smoke: bool,
    progress: bool,
    device: torch.device,
    precision: str,
) -> TrainingRun:
    """Data, model, objective, optimiser and sampler of a run, at epoch 0."""
    t0, cpu0, commit = time.time(), time.process_time(), git_commit()
    tree = {**git_state(), "commit": commit}
    if dist_info.enabled and not dist_info.is_main:
        barrier(dist_info)  # rank 0 fills the feature cache first; the others then read it
    data = prepare_data(cfg, root, smoke=smoke, progress=progress, device=device)
    if dist_info.enabled and dist_info.is_main:
        barrier(dist_info)
    # Seed after data preparation: feature extraction may or may not run (cache hits), and a DataLoader
    # draws from the global RNG, so seeding earlier would make initialisation depend on the cache.
    seed_everything(cfg.schedule.seed)
    data.features = data.features.to(device)  # once: batches index it where the model is
    model = build_model(cfg, data).to(device)  # initialised on the CPU, so every device starts from the same weights
    built = cfg.for_smoke() if smoke else cfg  # the smoke overlay's caps (MULE's LP epochs, ...)
    alignment = build_alignment(built, model, data, root)  # AME: the lexicons, the translators W_l
    if alignment is not None:
        alignment.aligner.to(device)
    objective = build_objective(built, model, data, root).to(device)  # its own parameters (MULE)
    prepare_word_embeddings(cfg, model, alignment)  # AME: lexicon initialisation, frozen words
    forward = model
    if dist_info.enabled:
        forward = torch.nn.parallel.DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=model.needs_language,
        )
    if isinstance(data.features, PhotoPixels) and device.type == "cuda":  # one batch shape for the backbone
        FixedPhotoBatch(model.image_tail, -(-cfg.schedule.batch_size // dist_info.world_size))
    run_key = {
        "config": cfg.to_dict(),
        "smoke": smoke,
        "vocab": data.captions.fingerprint(),
        "features": data.feature_key,
    }
    return TrainingRun(
        cfg=cfg,
        out_dir=out_dir,
        dist_info=dist_info,
        smoke=smoke,
        progress=progress,
        t0=t0,
        data=data,
        model=model,
        forward=forward,
        objective=objective,
        alignment=alignment,
        optimiser=build_optimiser(cfg, model, objective.parameters()),
        sampler=objective.sampler(),
        epochs=(cfg.smoke.epochs if smoke else cfg.schedule.epochs) + objective.pre_epochs,
        run_key=run_key,
        device=device,
        precision=precision,
        commit=commit,
        tree=tree,
        cpu0=cpu0,
        average=WeightAverage(model, cfg.schedule.ema_decay) if cfg.schedule.ema_decay > 0 else None,
    )


# fields that set how fast a run goes or how its finished model ranks, not what it learns: a run stopped at one
# thread count may resume at another, and a finished run resumed with another retrieval scoring is evaluated
# again under it (its training state is at the last epoch)
RUN_KEY_EXEMPT_FIELDS = ("threads", "retrieval_scoring", "csls_k")


def same_run(saved: dict, current: dict) -> bool:
    """Whether a saved training state belongs to this run: same data, vocabulary and features, and the same
    config up to fields added since with their defaults (see :func:`.config.changed_fields`) and the speed-only
    fields."""

    def key(k: dict) -> dict:
        cfg = {f: v for f, v in changed_fields(k["config"]).items() if f not in RUN_KEY_EXEMPT_FIELDS}
        return {**k, "config": cfg}

    return key(saved) == key(current)


def resume_run(run: TrainingRun) -> None:
    """Continue from the training state in the output folder, if there is one."""
    if not run.state_path.exists():
        log.info("no training state in %s; starting from scratch", run.out_dir)
        return
    state = load_training_state(run.state_path)
    if not same_run(state["run_key"], run.run_key):
        raise TrainingStateMismatch(
            "the saved training state belongs to a different config, data or "
            "vocabulary; start without --resume or use another --out",
            run.state_path,
        )
    run.model.load_state_dict(state["model"])
    run.optimiser.load_state_dict(state["optimiser"])
    load_objective_states(run, state)
    if run.average is not None:
        run.average.load_state_dict(state["average"])
    run.epoch, run.batch_pos, run.step = state["epoch"], state["batch"], state["step"]
    # states written before the time was kept: what their processes spent is unknown
    run.spent = state.get("spent", {"wall_s": 0.0, "cpu_s": 0.0, "processes": 1, "complete": False})
    set_rng_state(state["rng"], run.device)
    log.info("resuming at epoch %d batch %d (step %d)", run.epoch, run.batch_pos, run.step)


def load_objective_states(run: TrainingRun, state: dict) -> None:
    """The objective's and the word alignment's parameters from a training state. A state saved while the aligner
    was part of the objective keeps the aligner's under ``objective`` as ``aligner.*``."""
    objective = dict(state.get("objective", {}))
    alignment = state.get("alignment") or {
        k.removeprefix("aligner."): objective.pop(k) for k in list(objective) if k.startswith("aligner.")
    }
    if "objective" in state:
        run.objective.load_state_dict(objective)
    if run.alignment is not None:
        run.alignment.aligner.load_state_dict(alignment)


def save_run_state(run: TrainingRun) -> None:
    if not run.dist_info.is_main:
        return
    save_training_state(
        {
            "run_key": run.run_key,
            "model": run.model.state_dict(),
            "optimiser": run.optimiser.state_dict(),
            "objective": run.objective.state_dict(),
            "alignment": run.alignment.aligner.state_dict() if run.alignment is not None else {},
            "epoch": run.epoch,
            "batch": run.batch_pos,
            "step": run.step,
            "rng": rng_state(run.device),
            "spent": run.time_spent(),
            **({"average": run.average.state_dict()} if run.average is not None else {}),
        },
        run.state_path,
    )


def train_one_epoch(run: TrainingRun, *, save_every: int = 0, max_steps: int | None = None) -> bool:
    """Train from the run's position to the end of its epoch (state saved after it); True when ``max_steps``
    stopped it first."""
    cfg, objective, optimiser = run.cfg, run.objective, run.optimiser
    lr = cfg.schedule.lr * (0.1 if run.epoch - objective.pre_epochs >= cfg.schedule.lr_decay_epoch else 1.0)
    for group in optimiser.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
    if run.batch_pos == 0:
        objective.start_epoch(run.epoch)  # e.g. the Translator's map initialisation at the target stage
    batches = run.sampler.epoch_batches(run.epoch)
    if run.smoke and cfg.smoke.max_batches > 0:
        batches = batches[: cfg.smoke.max_batches]
    run.model.train()
    losses = []  # detached, on the run's device: reading each one (.item()) would wait for the GPU every step
    n_items, t_epoch, stopped = 0, time.perf_counter(), False
    photos = photo_feed(run, batches)
    # a bar on a terminal, and one line per epoch ("epoch 3/15: loss 0.123, 15 s") in any case
    with Progress(
        range(run.batch_pos, len(batches)),
        desc=f"epoch {run.epoch + 1}/{run.epochs}",
        unit="batch",
        enabled=run.progress,
    ) as bar:
        for b in bar:
            next(photos)
            losses.append(train_step(run, batches[b]))
            n_items += batch_items(batches[b])
            run.batch_pos = b + 1
            if save_every and run.step % save_every == 0:
                save_run_state(run)
            if max_steps is not None and run.step >= max_steps:
                stopped = True
                break
        if stopped and run.batch_pos < len(batches):
            save_run_state(run)
            bar.close(f"stopped at step {run.step} (batch {run.batch_pos} of {len(batches)})")
            return True
        run.epoch, run.batch_pos = run.epoch + 1, 0
        save_run_state(run)
        spent = run.time_spent()
        record = {
            "epoch": run.epoch,
            "step": run.step,
            "lr": lr,
            "loss": float(torch.stack(losses).double().mean()) if losses else None,  # one read an epoch
            "seconds": spent["wall_s"],
            "cpu_seconds": spent["cpu_s"],  # of the whole run so far
            # throughput of the training loop alone (sampling, padding, forward, backward, step)
            "loop_seconds": round(time.perf_counter() - t_epoch, 3),
            "items": n_items,
            **run.epoch_log(),
        }
        if run.dist_info.is_main:
            with open(run.out_dir / "train_log.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        # no losses: resumed from a state saved after the epoch's last batch
        bar.close(f"loss {record['loss']:.3f}" if losses else "no batches left")
    return stopped


def photo_feed(run: TrainingRun, batches: list) -> Iterator[None]:
    """One ``next`` before each step from the run's position: on the pixel path it stages that batch's photos
    (decoded ahead, polyvse_train.pixels), with augmented views the views its photos read (polyvse_train.
    photo_views); otherwise it does nothing."""
    if not isinstance(run.data.features, (PhotoPixels, PhotoViews)):
        return itertools.repeat(None)
    rows = [run.objective.photo_rows(batches[b], run.dist_info) for b in range(run.batch_pos, len(batches))]
    return run.data.features.feed(rows, run.epoch, run.batch_pos)


def train_step(run: TrainingRun, batch) -> torch.Tensor:
    """One optimisation step on one batch (and the objective's after-step hook); returns the loss, detached."""
    with autocast(run.device, run.precision, training=True):
        loss, _parts = run.objective(run.forward, batch, run.dist_info, run.epoch)
    run.optimiser.zero_grad(set_to_none=True)
    loss.backward()
    if run.cfg.schedule.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.cfg.schedule.grad_clip)
    run.optimiser.step()
    if run.average is not None:
        run.average.update(run.model)
    run.step += 1
    run.objective.after_step(run.step)
    if run.alignment is not None:
        run.alignment.after_step(run.step)
    return loss.detach()


def _time_fields(spent: dict) -> dict:
    """metrics.json's account of the run's time: wall and CPU seconds over all its processes (a resumed run has
    several), and whether the count is complete."""
    return {
        "wall_time_s": spent["wall_s"],
        "cpu_time_s": spent["cpu_s"],
        "processes": spent["processes"],
        "time_complete": spent["complete"],
        # torch threads it trained at, per process: the config's `threads` after --set, as torch applied it
        "threads_used": spent["threads"],
    }


def checkpoint_feature_key(cfg: TrainConfig, data: PreparedData, model: JointEmbeddingModel) -> str:
    """The key of the features the checkpoint's model reads: the extractor's it trained on, or on the pixel path
    its trained backbone's (polyvse.features.whole: a key that names the trained weights)."""
    if not isinstance(data.features, PhotoPixels):
        return data.feature_key
    from polyvse.features.whole import FineTunedExtractor

    return FineTunedExtractor(feature_backbone(cfg), model.image_tail).key


def finish_run(run: TrainingRun) -> dict:
    """Evaluate on the evaluation split, write the checkpoint and metrics.json; returns the metrics."""
    cfg, data, model = run.cfg, run.data, run.model
    if run.average is not None:  # the checkpoint and its evaluation are the averaged weights'
        run.average.copy_to(model)
    model.eval()
    ckpt = Checkpoint(
        model=model,
        captions=data.captions,
        backbone=feature_backbone(cfg),
        feature_key=checkpoint_feature_key(cfg, data, model),
        ten_crop=cfg.data.ten_crop,
        languages=list(cfg.data.languages),
        squash_photos=trained_on_squashed_photos(cfg.data.dataset),
    )
    if cfg.model.retrieval_scoring == "csls":  # the checkpoint carries its banks; the evaluation below uses them
        t_banks = time.perf_counter()
        ckpt.hubness = training_banks(PolyvseModel(ckpt), data, cfg.model.csls_k, clip_k=run.smoke)
        log.info("CSLS banks (%s) in %.0f s", ckpt.hubness.describe(), time.perf_counter() - t_banks)
    per_lang = evaluate_split(PolyvseModel(ckpt), data, data.eval, data.eval_rows, cfg.data.languages)
    metrics = {
        "dataset": cfg.data.dataset,
        "split": f"{cfg.data.split}/{cfg.data.eval_split}" if cfg.data.split == "official" else cfg.data.split,
        "seed": cfg.schedule.seed,
        "smoke": run.smoke,
        "languages": per_lang,
        "n_train_photos": int(len(data.train_rows)),
        "n_train_captions": int(len(data.train.ids)),
        "n_train_captions_by_language": {lang: data.train.langs.count(lang) for lang in cfg.data.languages},
        "n_failed_photos": data.n_failed_photos,
        "vocab_size": vocab_size(data.captions),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        **_time_fields(run.time_spent()),
        "config": cfg.to_dict(),
        "device": str(run.device),
        "precision": run.precision,
        "retrieval": ckpt.retrieval,
    }
    metrics.update(run.epoch_log())
    if data.text_tuples is not None:
        metrics["text_corpus"] = data.text_tuples.summary()
    ckpt.training = {
        "data": cfg.data.dataset,
        "split": metrics["split"],
        "seed": cfg.schedule.seed,
        "commit": run.commit,
        "config": cfg.to_dict(),
        "metrics": per_lang,
        "threads_used": metrics["threads_used"],
    }
    # with its image encoder as ONNX: an install without torch embeds its photos (polyvse.features.onnx_encoder)
    checkpoint = save_checkpoint(ckpt, run.out_dir / "checkpoint", image_encoder=True)
    # provenance with the saved checkpoint's fingerprint (an index built with it records the same), in both records
    prov = provenance(model=checkpoint_model(checkpoint, config=cfg.name), tree=run.tree)
    write_json_atomic(checkpoint / TRAINING, {**ckpt.training, "provenance": prov})
    metrics["provenance"] = prov
    write_json_atomic(run.out_dir / "metrics.json", metrics)
    return metrics
