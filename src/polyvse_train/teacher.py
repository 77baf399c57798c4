"""Teacher learning on parallel text (Multilingual-CLIP, Carlsson et al. 2022) for a frozen-tower run.

Multi30K's task1 lines are translations of one English caption into de, fr and cs, for ~29k Flickr30K photos of
which only a quarter are among the photos at hand. Their text still teaches: each training step also takes a batch
of (student line, English line) pairs and pulls the model's embedding of the student line onto its own embedding of
the English line, held fixed (detached), with InfoNCE over the batch. The teacher is the model itself, in the
language it reads best (for the fused e5 + USE tower, cs has e5's part only; en has both).

Pairs come from the dataset's text-only corpus (``<dataset>-text``), restricted to Multi30K task1; a student language
Multi30K lacks (zh, es, ar, qu, gn) takes MultiScript30k's machine translations of the same task1 English lines
(``polyvse.data.multiscript30k``), paired with the corpus's teacher line of the same photo. All of it goes through the
run's evaluation exclusion (``polyvse.data.exclusion``): no pair whose photo or either sentence an evaluation uses --
Multi30K's test_2016 lines, which the cross-lingual task scores, included.
Their sentence vectors come from the same cache as the captions' (``polyvse features embed-text --dataset
f8k-full-text --source multi30k-task1 --langs cs,en`` fills it ahead of time).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from polyvse.data.exclusion import EvaluationExclusion
from polyvse.data.multi30k import TASK1_LANGS
from polyvse.device import autocast_off
from polyvse.errors import DataError
from polyvse.losses import InfoNceLoss

#: the parallel lines: Multi30K task1 (one English caption and its de/fr/cs translations per photo)
TEACHER_SOURCE = "multi30k-task1"
SMOKE_PAIRS = 64


@dataclass
class TeacherPairs:
    """Model inputs of the student lines and of their teacher-language lines, row by row."""

    student: list
    teacher: list
    langs: list[str]  # the student language of each pair

    def __len__(self) -> int:
        return len(self.student)


def load_teacher_pairs(
    cfg, root: Path, encoder, exclusion: EvaluationExclusion, train_ids: set[str], smoke: bool = False
) -> TeacherPairs | None:
    """The (student, teacher) pairs of ``cfg.objective.teacher_students``, or None when teacher learning is off;
    ``teacher_photos: train`` keeps only the lines of the run's training photos (the ablation without extra text)."""
    obj = cfg.objective
    if not obj.teacher_students:
        return None
    if cfg.model.text_encoder != "pretrained" or obj.name != "vse":
        raise DataError(
            "objective.teacher_students: teacher learning runs with objective vse and a frozen "
            "pretrained text tower (model.text_encoder: pretrained)"
        )
    from polyvse.data.registry import list_datasets, load_dataset
    from polyvse.modules.text_input import caption_inputs

    name = f"{cfg.data.dataset}-text"
    if name not in dict(list_datasets()):
        raise DataError(
            f"objective.teacher_students: dataset {cfg.data.dataset} has no text-only corpus "
            f"{name!r} to take parallel lines from"
        )
    corpus = load_dataset(name, root)
    teacher_of: dict[str, object] = {}
    students: dict[tuple[str, str], object] = {}
    for c in corpus.captions:
        if c.source != TEACHER_SOURCE or exclusion.excludes(c.photo_id, c.text):
            continue
        if obj.teacher_photos == "train" and c.photo_id not in train_ids:
            continue
        if c.lang == obj.teacher_language:
            teacher_of.setdefault(c.photo_id, c)
        elif c.lang in obj.teacher_students:
            students.setdefault((c.photo_id, c.lang), c)
    students.update(
        _multiscript_students(
            root, obj.teacher_students, exclusion, train_ids if obj.teacher_photos == "train" else None
        )
    )
    pairs = [(s, teacher_of[pid]) for (pid, _), s in sorted(students.items()) if pid in teacher_of]
    if smoke:
        pairs = pairs[:SMOKE_PAIRS]
    if not pairs:
        raise DataError(
            f"objective.teacher_students: {name} holds no parallel lines in "
            f"{', '.join(obj.teacher_students)} with a {obj.teacher_language} line of the same photo"
        )
    inputs = caption_inputs(encoder, [s for s, _ in pairs] + [t for _, t in pairs])
    return TeacherPairs(inputs[: len(pairs)], inputs[len(pairs) :], [s.lang for s, _ in pairs])


def _multiscript_students(root: Path, langs, exclusion: EvaluationExclusion, photos: set[str] | None) -> dict:
    """{(photo, lang): caption} of MultiScript30k's lines for the student languages Multi30K task1 lacks (every
    split it has; the exclusion drops the evaluated ones), keeping to ``photos`` when given."""
    from polyvse.data.multiscript30k import LANGUAGES, SOURCE, MultiScript30kReader
    from polyvse.data.types import Caption

    wanted = [lang for lang in langs if lang not in TASK1_LANGS]
    unknown = [lang for lang in wanted if lang not in LANGUAGES]
    if unknown:
        raise DataError(
            f"objective.teacher_students: no parallel lines for {', '.join(unknown)} (Multi30K task1 "
            f"has {', '.join(TASK1_LANGS)}; MultiScript30k has {', '.join(LANGUAGES)})"
        )
    out = {}
    for line in MultiScript30kReader(root).all_lines(wanted):
        if exclusion.excludes(line.photo_id, line.text) or (photos is not None and line.photo_id not in photos):
            continue
        out.setdefault((line.photo_id, line.lang), Caption(line.photo_id, line.lang, line.text, SOURCE, line.split))
    return out


class TeacherLoss:
    """InfoNCE between the students' embeddings and the (detached) teacher embeddings of a random batch of pairs;
    the batch is drawn from (seed, epoch, the image batch), so a resumed run draws the same pairs."""

    def __init__(self, pairs: TeacherPairs, batch_size: int, temperature: float, seed: int, teacher_language: str):
        self.pairs, self.batch_size, self.seed = pairs, min(batch_size, len(pairs)), seed
        self.teacher_language = teacher_language
        self.loss = InfoNceLoss(temperature)

    def rows(self, epoch: int, image_batch) -> np.ndarray:
        """The pairs of this step, drawn from (seed, epoch, the image batch): the same on every rank."""
        batch = np.asarray(image_batch)
        rng = np.random.default_rng([self.seed, epoch, int(batch[0]), int(batch[-1]), len(batch)])
        return rng.choice(len(self.pairs), size=self.batch_size, replace=False)

    def loss_of(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        """InfoNCE between student embeddings and the (detached) teacher embeddings of the same pairs."""
        student, teacher = F.normalize(student, dim=-1), F.normalize(teacher.detach(), dim=-1)
        with autocast_off(student.device):  # InfoNCE's logits in fp32 under bf16 autocast
            return self.loss(student.float() @ teacher.float().T)

    def __call__(self, model, captions, epoch: int, image_batch) -> torch.Tensor:
        """One process: the model embeds the step's pairs itself (under DDP the objective's one pass through the
        wrapper embeds them with the captions instead: ``objectives.vse``)."""
        rows = self.rows(epoch, image_batch)
        langs = [self.pairs.langs[i] for i in rows]
        ids, lengths = captions.pad([self.pairs.student[i] for i in rows])
        student = model.encode_text_ids(ids, lengths, langs if model.needs_language else None)
        with torch.no_grad():
            ids, lengths = captions.pad([self.pairs.teacher[i] for i in rows])
            teacher_langs = [self.teacher_language] * len(rows) if model.needs_language else None
            teacher = model.encode_text_ids(ids, lengths, teacher_langs)
        return self.loss_of(student, teacher)
