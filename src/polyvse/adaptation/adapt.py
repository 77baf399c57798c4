"""Teach a checkpoint a new language from a parallel file, no photos: what `polyvse adapt` runs.

    read the parallel file (``parallel_file``)  ->  the towers' vectors of both sides (``line_vectors``, cached)
    -> the model's own embeddings of the counterparts (the targets, fixed)
    -> hold out pairs (``VAL_SHARE`` of them, at most ``VAL_MAX``) to choose on: the epoch, and to report
       zero-shot against adapted translation mR
    -> the new part: teacher learning from the zero-shot part (``teacher``), or the pivot's part behind a
       Procrustes / RCSLS map of the tower vectors (``tower_map``)
    -> a new checkpoint with the part and its record (``adapted_checkpoint``)

The teacher's state is written after every epoch to ``<out>.adapt-state.pt`` (atomically) and removed once the new
checkpoint is saved; ``resume=True`` continues a stopped run from it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import DataError
from ..model.checkpoint import load_checkpoint, save_checkpoint
from ..model.parts import is_subword_part
from ..model.zero_shot import ZERO_SHOT_DEFAULT, fallback_part
from ..modules.pretrained.cache import sentence_cache_dir
from .adapted_checkpoint import check_adaptable, trained_languages, with_language_part
from .line_vectors import line_vectors
from .options import METHODS
from .parallel_file import DEFAULT_PIVOT_LANG, LANGUAGE_CODE, read_parallel_file
from .teacher import TeacherSettings, fit_teacher, held_out_mr
from .tower_map import fit_tower_map, part_through_map

__all__ = ["AdaptRequest", "adapt_language", "held_out_rows", "METHODS", "state_path_of", "teacher_targets"]

VAL_SHARE, VAL_MAX, VAL_MIN_LINES = 0.1, 1000, 20  # held-out pairs; files under VAL_MIN_LINES hold none out


@dataclass
class AdaptRequest:
    checkpoint: Path
    lang: str
    parallel: Path
    out: Path
    method: str = "teacher"
    pivot_lang: str = DEFAULT_PIVOT_LANG
    lines: int | None = None  # the file's first N pairs
    zero_shot_init: str = ZERO_SHOT_DEFAULT  # the teacher's starting part
    teacher: TeacherSettings = dataclasses.field(default_factory=TeacherSettings)
    rcsls_epochs: int = 10
    resume: bool = False
    skip_bad_lines: bool = False
    cache_dir: Path | None = None  # sentence cache (default: <cache root>/sentences)
    progress: bool = True


def state_path_of(out: Path) -> Path:
    return Path(f"{out}.adapt-state.pt")


def adapt_language(req: AdaptRequest, report: Callable[[str], None] = print) -> dict:
    """Write ``req.out``, the checkpoint with ``req.lang`` taught; returns the language's record."""
    t0 = time.perf_counter()
    lang = _language_code(req.lang)
    _check_request(req)
    ck = load_checkpoint(req.checkpoint)
    check_adaptable(ck, lang)
    trained = trained_languages(ck)
    pf, pivots = _read_pairs(req, trained, report)
    report(
        f"adapt {lang}: {len(pf.lines)} pairs from {req.parallel} (counterparts in {', '.join(pivots)}), "
        f"method {req.method}"
    )
    model, captions = ck.model.eval(), ck.captions
    x_new, x_pivot = _pair_vectors(req, model, captions, pf, lang, pivots)
    targets = teacher_targets(model, x_pivot, [x.pivot_lang for x in pf.lines])
    val, train = held_out_rows(len(pf.lines), req.teacher.seed)
    init = fallback_part(model.text_encoder, req.zero_shot_init, trained)
    if req.teacher.subwords is None:  # on for teacher learning in every language: chosen on val (docs/decisions.md)
        req = dataclasses.replace(req, teacher=dataclasses.replace(req.teacher, subwords=req.method == "teacher"))
    texts_val = [pf.lines[i].text for i in val]
    zero_shot_mr = held_out_mr(model, init, x_new[val], targets[val]) if len(val) else None
    if req.method != "teacher" and req.teacher.subwords:
        raise DataError(f"--subwords is a teacher student; --method {req.method} maps tower vectors only")
    part, details = _fit_part(req, model, captions, init, lang, pf, pivots, (x_new, x_pivot, targets), (train, val))
    adapted_mr = held_out_mr(model, part, x_new[val], targets[val], texts_val) if len(val) else None
    record = _language_record(req, pf, pivots, part, details, (train, val), (zero_shot_mr, adapted_mr))
    # the image side is the source checkpoint's: so is its ONNX image encoder (exported where it has none)
    save_checkpoint(with_language_part(ck, lang, part, record), req.out, image_encoder=req.checkpoint)
    if req.method == "teacher":
        state_path_of(req.out).unlink(missing_ok=True)
    if zero_shot_mr is not None:
        report(
            f"held-out translation mR ({len(val)} pairs, {lang} -> its counterpart): zero-shot "
            f"{zero_shot_mr:.1f}, adapted {adapted_mr:.1f}"
        )
    report(
        f"wrote {req.out} (languages: {', '.join(ck.languages + ([lang] if lang not in ck.languages else []))}; "
        f"{time.perf_counter() - t0:.0f} s)"
    )
    return record


def _check_request(req: AdaptRequest) -> None:
    """Refuse an unknown method, or an output that would overwrite the checkpoint being adapted."""
    if req.method not in METHODS:
        raise DataError(f"--method {req.method!r}: choose one of {', '.join(METHODS)}")
    if Path(req.out).resolve() == Path(req.checkpoint).resolve():
        raise DataError(f"--out {req.out} is the checkpoint being adapted; write the adapted model elsewhere")


def _read_pairs(req: AdaptRequest, trained: list[str], report: Callable[[str], None]):
    """The parallel file and its counterparts' languages, each one the model trained on (one only for a map)."""
    pf = read_parallel_file(req.parallel, req.pivot_lang, skip_bad_lines=req.skip_bad_lines, limit=req.lines)
    for problem in pf.problems:
        report(f"skipped: {problem}")
    pivots = pf.pivot_languages
    unknown = [p for p in pivots if p not in trained]
    if unknown:
        raise DataError(
            f"counterparts in {', '.join(unknown)}, which the model did not train on; the counterpart "
            f"must be in one of {', '.join(trained)} (--pivot-lang, or pivot_lang in a JSONL file)",
            req.parallel,
        )
    if req.method != "teacher" and len(pivots) > 1:
        raise DataError(
            f"--method {req.method} maps onto one pivot language, the file has {', '.join(pivots)}; "
            "split the file by pivot_lang or use --method teacher",
            req.parallel,
        )
    return pf, pivots


def _pair_vectors(req: AdaptRequest, model, captions, pf, lang: str, pivots: list[str]):
    """The towers' vectors of the new sentences and of their counterparts (each in its own language), cached."""
    cache = req.cache_dir if req.cache_dir is not None else sentence_cache_dir()
    x_new = torch.from_numpy(
        line_vectors(captions, [x.text for x in pf.lines], lang, cache, req.progress, model.text_encoder)
    )
    x_pivot = torch.zeros_like(x_new)
    for pivot in pivots:
        rows = [i for i, x in enumerate(pf.lines) if x.pivot_lang == pivot]
        x_pivot[rows] = torch.from_numpy(
            line_vectors(
                captions, [pf.lines[i].pivot_text for i in rows], pivot, cache, req.progress, model.text_encoder
            )
        )
    return x_new, x_pivot


def _fit_part(req: AdaptRequest, model, captions, init, lang: str, pf, pivots: list[str], vectors, rows):
    """The new part and the teacher's report ({} for a map): teacher learning from ``init``, or the pivot's part
    behind a map of the tower vectors. ``vectors``: (new, counterpart, targets); ``rows``: (train, held out)."""
    (x_new, x_pivot, targets), (train, val) = vectors, rows
    if req.method != "teacher":
        W = fit_tower_map(
            captions,
            lang,
            pivots[0],
            x_new[train],
            x_pivot[train],
            req.method,
            rcsls_epochs=req.rcsls_epochs,
            seed=req.teacher.seed,
        )
        return part_through_map(model.text_encoder.universal[pivots[0]], W), {}
    texts_new = [x.text for x in pf.lines]
    identity = {
        "checkpoint": str(Path(req.checkpoint).resolve()),
        "lang": lang,
        "file_sha256": pf.sha256,
        "lines": len(pf.lines),
        "zero_shot_init": req.zero_shot_init,
    }
    return fit_teacher(
        model,
        init,
        x_new[train],
        targets[train],
        x_new[val],
        targets[val],
        req.teacher,
        state_path=state_path_of(req.out),
        identity=identity,
        resume=req.resume,
        progress=req.progress,
        desc=f"adapt {lang} (teacher)",
        texts_train=[texts_new[i] for i in train],
        texts_val=[texts_new[i] for i in val],
    )


def _language_record(req: AdaptRequest, pf, pivots: list[str], part, details: dict, rows, mrs) -> dict:
    """The new language's record in the checkpoint: method, data, held-out mR (``mrs``: zero-shot, adapted) and,
    for teacher learning, its epochs and settings."""
    (train, val), (zero_shot_mr, adapted_mr) = rows, mrs
    return {
        "method": req.method,
        "pivot_lang": pivots[0] if len(pivots) == 1 else pivots,
        "lines": len(pf.lines),
        "train_lines": len(train),
        "held_out_lines": len(val),
        "file": Path(req.parallel).name,
        "file_sha256": pf.sha256,
        "seed": req.teacher.seed,
        "held_out_translation_mr": {"zero_shot": zero_shot_mr, "adapted": adapted_mr},
        **(
            {
                "zero_shot_init": req.zero_shot_init,
                "epochs": details["epochs"],
                "best_epoch": details["best_epoch"],
                "settings": dataclasses.asdict(req.teacher),
            }
            if req.method == "teacher"
            else {}
        ),
        **({"subwords": part.spec.to_dict()} if is_subword_part(part) else {}),
    }


def _language_code(lang: str) -> str:
    norm = (lang or "").strip().lower()
    if not LANGUAGE_CODE.fullmatch(norm):
        raise DataError(f"--lang {lang!r} is not a language code (ISO 639, e.g. qu, gn)")
    return norm


@torch.no_grad()
def teacher_targets(model, x_pivot: torch.Tensor, langs: list[str], batch: int = 1024) -> torch.Tensor:
    """Unit-length embeddings of the counterparts by the model itself, in their own languages (fixed). The rows
    are sentence vectors (2-D: past the e5 tail, if the model has one)."""
    out = [
        model.encode_text_ids(x_pivot[i : i + batch], torch.ones(len(x_pivot[i : i + batch])), langs[i : i + batch])
        for i in range(0, len(x_pivot), batch)
    ]
    return F.normalize(torch.cat(out), dim=-1).cpu()


def held_out_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(held-out rows, training rows): a seeded draw of VAL_SHARE of the pairs (at most VAL_MAX)."""
    n_val = 0 if n < VAL_MIN_LINES else min(VAL_MAX, int(round(n * VAL_SHARE)))
    order = np.random.default_rng([seed, n]).permutation(n)
    return np.sort(order[:n_val]), np.sort(order[n_val:])
