"""Is a word-translation P@1 of ~0 real or a measurement artefact? Diagnostics of one trained checkpoint.

For each language and each part of the MUSE lexicon (held-out test part, train part; see
``polyvse.alignment.muse_lexicon``), filtered to the checkpoint's vocabulary, prints:

    p1          CSLS P@1 of the word vectors (what `polyvse evaluate --task words` reports)
    chance      P@1 of a random pick among the pivot-language words (mean number of gold translations / |V|)
    cos_pair    mean cosine of a source word and its translation ...
    cos_rand    ... and of a source word and a random pivot word: equal means no word-level alignment
    sanity      P@1 of the same evaluator once every source word is placed (±1e-2 noise) at a translation:
                ~100 says the lexicon matches the vocabulary and the target space is the right one
    p1_sentence CSLS P@1 of each word encoded as a one-word sentence into the joint space, where the model
                aligns languages (through images)

    PYTHONPATH=src POLYVSE_DATA=<data root> python scripts/word_vectors_diagnostics.py RUN/checkpoint [...]
"""

from __future__ import annotations

import argparse

import torch
from torch.nn import functional as F

import polyvse
from polyvse.alignment import (
    LEXICON_PARTS,
    filter_lexicon,
    group_lexicon,
    muse_lexicon,
    muse_paths,
    word_translation_p_at_1,
)
from polyvse.evaluation.words import words_of
from polyvse.util.paths import data_root


def encode_words(pm, lang: str) -> tuple[dict[str, int], torch.Tensor, torch.Tensor]:
    """({word: row}, word vectors, one-word-sentence embeddings) of the ``lang`` words of the vocabulary."""
    ids, words = words_of(pm.captions.vocab, lang)
    with torch.no_grad():
        vectors = pm.model.text_encoder.word_vectors(torch.tensor(ids), lang).float()
    return words, vectors, torch.as_tensor(pm.encode_text(list(words), lang))


def diagnose(root, lang: str, pivot: str, part: str, source, target, generator: torch.Generator) -> dict | None:
    (src_words, src, src_sent), (tgt_words, tgt, tgt_sent) = source, target
    pairs, _ = filter_lexicon(muse_lexicon(root, lang, pivot, part), src_words, tgt_words)
    gold = group_lexicon(pairs)
    if len(gold) < 10:
        return None
    k = min(10, len(src), len(tgt))
    rand = torch.randint(0, len(tgt), (len(pairs),), generator=generator)
    s, t = F.normalize(src, dim=1), F.normalize(tgt, dim=1)
    aligned = src.clone()
    for row, targets in gold.items():
        aligned[row] = tgt[min(targets)] + 1e-2 * torch.randn(tgt.shape[1], generator=generator)
    return {
        "words": len(gold),
        "p1": word_translation_p_at_1(src, tgt, pairs, k=k),
        "chance": 100 * sum(len(g) for g in gold.values()) / len(gold) / len(tgt),
        "cos_pair": (s[pairs[:, 0]] * t[pairs[:, 1]]).sum(1).mean().item(),
        "cos_rand": (s[pairs[:, 0]] * t[rand]).sum(1).mean().item(),
        "sanity": word_translation_p_at_1(aligned, tgt, pairs, k=k),
        "p1_sentence": word_translation_p_at_1(src_sent, tgt_sent, pairs, k=k),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoints", nargs="+", help="checkpoint folders (<run>/checkpoint)")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    args = p.parse_args(argv)
    root = data_root(args.data_root)
    for ck in args.checkpoints:
        pm = polyvse.load(ck)
        pivot = "en" if "en" in pm.languages else pm.languages[0]
        print(
            f"\n{ck}\n| lang | part | words | p1 | chance | cos_pair | cos_rand | sanity | p1_sentence |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"
        )
        target = encode_words(pm, pivot)
        for lang in pm.languages:
            if lang == pivot or not muse_paths(root, lang, pivot, check=False).is_file():
                continue
            source = encode_words(pm, lang)
            for part in LEXICON_PARTS:
                r = diagnose(root, lang, pivot, part, source, target, torch.Generator().manual_seed(0))
                if r is not None:
                    print(
                        f"| {lang}→{pivot} | {part} | {r['words']} | {r['p1']:.1f} | {r['chance']:.2f} | "
                        f"{r['cos_pair']:+.3f} | {r['cos_rand']:+.3f} | {r['sanity']:.1f} | {r['p1_sentence']:.1f} |",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
