"""Evaluation tasks of a trained model beyond image-sentence retrieval, one function each; used by
`polyvse evaluate --task ...` and by the method zoo (``polyvse_train.zoo``).

    crosslingual  caption-caption retrieval R@1/5/10 both ways (en-de, en-fr, en-cs, en-zh) on the F8K-ML
                  test photos and Multi30K test_2016, leaving out the pairs of the model's training photos
    sts           SemEval STS (2012 MSRvid, 2014 images, 2015 images): Pearson r x 100 of the cosine of the
                  English text embeddings, as Gella et al. and Calixto & Liu report
    words         word-translation P@1 (CSLS) of the model's word vectors into English on the held-out test
                  part of the MUSE dictionaries (polyvse.alignment.muse_lexicon), for models that have word
                  embeddings
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("polyvse.tasks")
TASKS = ("crosslingual", "sts", "words")


def training_photo_ids(model: Any, root: Path) -> set[str] | None:
    """Photos the checkpoint trained on, recomputed from the config in its training metadata (None when a
    checkpoint carries no such metadata, e.g. one written by other code).

    The trainer records its config in the flat form (``polyvse_train.config.TrainConfig.to_dict``); of it, the
    data fields ``dataset``, ``split`` and ``eval_split`` say which photos trained, with the trainer's defaults
    for one that a config saved before the field existed lacks."""
    from ..data.registry import DEFAULT_DATASET, load_dataset
    from ..data.splits import DEFAULT_EVAL_SPLIT, OFFICIAL, resolve_split

    saved = (getattr(getattr(model, "checkpoint", None), "training", None) or {}).get("config")
    if not saved:
        return None
    train, _ = resolve_split(load_dataset(saved.get("dataset", DEFAULT_DATASET), root),
                             saved.get("split", OFFICIAL), saved.get("eval_split", DEFAULT_EVAL_SPLIT))
    return train


def crosslingual_task(model: Any, root: Path, exclude_photo_ids=None) -> dict:
    from .crosslingual import evaluate_crosslingual

    if exclude_photo_ids is None:
        exclude_photo_ids = training_photo_ids(model, root)
        if exclude_photo_ids is None:
            log.warning("the checkpoint does not say which photos it trained on: no pair is excluded")
    return evaluate_crosslingual(model, root, exclude_photo_ids=exclude_photo_ids or ())


def sts_task(model: Any, root: Path) -> dict | None:
    from .sts import evaluate_sts

    if "en" not in model.languages:
        return None
    return evaluate_sts(model, root, lang="en")


def words_task(model: Any, root: Path) -> dict | None:
    """``{lang: entry}``: P@1 on the held-out test part of the MUSE lexicon (``p_at_1``, ``n_words``) and, as
    ``train_p_at_1`` / ``n_train_words``, on its train part -- the pairs lexicon-trained configs were given,
    so for them a measure of what they kept, not of translation."""
    from .words import has_word_vectors, word_translation_by_language

    if not has_word_vectors(model) or len(model.languages) < 2:
        return None
    # into English; a model without English (the Translator's de/fr) translates into its first language
    pivot = "en" if "en" in model.languages else model.languages[0]
    test = word_translation_by_language(model, root, pivot=pivot, skip_missing=True)
    train = word_translation_by_language(model, root, pivot=pivot, part="train", skip_missing=True)
    out = {}
    for lang in dict.fromkeys([*test, *train]):
        entry = dict(test.get(lang, {"pivot": pivot}))
        if lang in train:
            entry.update(train_p_at_1=train[lang]["p_at_1"], n_train_words=train[lang]["n_words"])
        out[lang] = entry
    return out


def run_tasks(model: Any, root: Path, tasks=TASKS, exclude_photo_ids=None) -> dict:
    """``{task: result}`` for each task; a task that does not apply to the model gives None."""
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        raise ValueError(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(TASKS)}")
    out: dict[str, Any] = {}
    for task in tasks:
        if task == "crosslingual":
            out[task] = crosslingual_task(model, root, exclude_photo_ids)
        elif task == "sts":
            out[task] = sts_task(model, root)
        else:
            out[task] = words_task(model, root)
    return out
