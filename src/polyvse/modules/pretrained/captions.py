"""From raw captions to frozen sentence vectors: the text input of a model with a pretrained text branch.

It plays the part :class:`polyvse.modules.text_input.CaptionEncoder` plays for word-level models, with the
same methods, so the trainer, the evaluator and ``PolyvseModel.encode_text`` need no second path:

    ids_many(texts, lang)  each caption's model input: its sentence vector (a float32 row), taken from the
                           content-keyed embedding cache when ``cache_dir`` is set (training, evaluation),
                           else computed (new sentences at inference)
    pad(rows)              (vectors (n, 1, dim), lengths all 1) -- what ``PretrainedTextEncoder`` reads
    to_dict / from_dict    what the checkpoint records: encoder name, options, backend package and version

A checkpoint records the backend version because the head was trained on that version's vectors: loading it
where the package is missing, or at another version, is an error that names the pip command.

With a trainable e5 tail (``tail_layers`` k > 0, :mod:`.e5.tail`), e5's part of a caption's input is not its sentence
vector but the hidden states entering e5's last k layers (float16 (tokens, 384), from the frozen front through the
content-keyed state cache, :mod:`.e5.states_cache`); ``pad`` lays them out as (n, T, 384 + the other towers' sizes),
the other towers' vectors riding on the first position, and the text branch's tail runs the last k layers.

Several towers at once (``"e5-small+use-multilingual"``): a caption's input is the concatenation of every
tower's vector, each in its own slice (``tower_dims``); a tower that lacks the caption's language (USE has no
Czech) contributes zeros there, so the learned head fuses what each language has (see
``PretrainedTextEncoder``'s tower dropout, which trains the head to work with one tower alone).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import CheckpointError
from ..config import PRETRAINED_CAPTIONS as KIND
from .base import PretrainedModelError, PretrainedSentenceEncoder, get_pretrained_encoder, package_version, tower_names
from .cache import encode_cached, sentence_cache_dir

if TYPE_CHECKING:
    import torch

__all__ = ["PretrainedCaptionEncoder", "KIND", "use_sentence_cache"]


class PretrainedCaptionEncoder:
    """Captions -> frozen sentence vectors of registry encoder ``name`` (see the module docstring)."""

    vocab = None  # no word vocabulary: the sentence encoder tokenises for itself

    def __init__(
        self,
        name: str,
        options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = None,
        progress: bool = False,
        tail_layers: int = 0,
    ):
        self.name = name
        self.options = dict(options or {})
        names = tower_names(name)
        if len(names) > 1 and self.options:
            raise PretrainedModelError(
                f"{name}: options apply to a single sentence encoder, not to a fusion of {len(names)}"
            )
        if len(set(names)) != len(names):
            raise PretrainedModelError(f"{name}: a sentence encoder appears twice")
        self.towers: list[PretrainedSentenceEncoder] = [get_pretrained_encoder(n, **self.options) for n in names]
        self.encoder = self.towers[0]  # the tower (the only one unless fused)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.progress = progress
        self.tail_layers = int(tail_layers)
        if self.tail_layers and self.encoder.name != "e5-small":
            raise PretrainedModelError(
                f"{name}: a trainable text tail is e5-small's; put e5-small first "
                "(e5-small or e5-small+use-multilingual)"
            )
        self._front = None

    @property
    def front(self):
        """e5 up to the tail's cut (``tail_layers`` > 0), built on first use unless one was set: with ``cache_dir``
        the front that fills the state cache (``POLYVSE_FRONT_RUNTIME``: ONNX Runtime on the CPU by default, its
        graph kept in the cache), else torch's ``E5Front``."""
        if self._front is None:
            from .e5.front_onnx import make_front

            self._front = make_front(
                self.tail_layers,
                self.encoder.prefix,
                cache_dir=self.cache_dir,
                runtime=None if self.cache_dir is not None else "torch",
            )
        return self._front

    @front.setter
    def front(self, front) -> None:
        """Another front with ``E5Front``'s ``states`` (the torch-free query path's ``polyvse.model.numpy_serving.e5.NumpyE5Front``)."""
        self._front = front

    @property
    def tower_dims(self) -> list[int]:
        return [t.dim for t in self.towers]

    @property
    def dim(self) -> int:
        return sum(self.tower_dims)

    @property
    def languages(self) -> frozenset[str]:
        return frozenset().union(*(t.languages for t in self.towers))

    @property
    def version(self) -> str:
        return "+".join(t.version for t in self.towers)

    def reads(self, lang: str, *, unlisted: bool = False) -> bool:
        """Whether some tower gives ``lang`` a vector (``unlisted``: see ``PretrainedSentenceEncoder.check_language``)."""
        return any(t.reads(lang, unlisted=unlisted) for t in self.towers)

    def ids_many(self, texts: Sequence[str], lang: str, *, unlisted: bool = False) -> list[np.ndarray]:
        """The sentence vector of each text (float32 rows of one matrix); fused towers side by side. ``unlisted``:
        a language the model has no trained part for (zero-shot, adapted), read by the towers that read it."""
        texts = list(texts)
        if not self.reads(lang, unlisted=unlisted):
            self.encoder.check_language(lang, unlisted=unlisted)  # the error that names the languages
        parts = []
        for tower in self.towers:
            if self.tail_layers and tower is self.encoder:  # reads every script (XLM-R's pieces): no zeros
                tower.check_language(lang, unlisted=unlisted)
                parts.append(self._states(texts))
            elif len(self.towers) > 1 and not tower.reads(lang, unlisted=unlisted):
                parts.append(np.zeros((len(texts), tower.dim), dtype=np.float32))
            elif self.cache_dir is not None:
                parts.append(
                    encode_cached(tower, texts, lang, self.cache_dir, progress=self.progress, unlisted=unlisted)
                )
            else:
                parts.append(tower.encode(texts, lang, unlisted=unlisted))
        if self.tail_layers:  # (states, the other towers' vector) per text
            rest = np.concatenate(parts[1:], axis=1) if len(parts) > 1 else np.zeros((len(texts), 0), np.float32)
            return list(zip(parts[0], rest))
        vecs = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        return list(vecs)

    def _states(self, texts: list[str]) -> list[np.ndarray]:
        if self.cache_dir is not None:
            from .e5.states_cache import states_cached

            return states_cached(self.front, texts, self.cache_dir, progress=self.progress)
        return self.front.states(texts)

    def ids(self, text: str, lang: str) -> np.ndarray:
        return self.ids_many([text], lang)[0]

    def pad(self, rows: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        import torch  # only here: the rest of the class serves the torch-free query path (polyvse.model.numpy_serving.tower_query)

        if len(rows) == 0:
            return torch.zeros((0, 1, self.dim)), torch.zeros(0, dtype=torch.long)
        if self.tail_layers:
            from .e5.tail import pad_states

            x, lengths = pad_states([states for states, _ in rows], self.dim)
            h = self.tower_dims[0]
            x[:, 0, h:] = torch.from_numpy(np.stack([np.asarray(rest, dtype=np.float32) for _, rest in rows]))
            return x, lengths
        vecs = torch.from_numpy(np.stack([np.asarray(r, dtype=np.float32) for r in rows]))
        return vecs[:, None, :], torch.ones(len(rows), dtype=torch.long)

    def fingerprint(self) -> str:
        """What produced the vectors (encoder, options, backend version), as a short hash."""
        ids = "+".join(t.cache_id for t in self.towers)
        tail = f"|tail={self.tail_layers}" if self.tail_layers else ""  # absent: the fingerprints of before
        return hashlib.sha256(f"{ids}|{self.dim}{tail}".encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {
            "kind": KIND,
            "encoder": self.name,
            "options": self.options,
            "version": self.version,
            "package": "+".join(t.package for t in self.towers),
            "dim": self.dim,
            "cache_id": "+".join(t.cache_id for t in self.towers),
            **({"tail_layers": self.tail_layers} if self.tail_layers else {}),
        }

    @classmethod
    def from_dict(cls, d: dict, source: str | os.PathLike = "<checkpoint>") -> PretrainedCaptionEncoder:
        """Rebuild from a checkpoint; the backend package must be installed at the recorded version."""
        try:
            enc = cls(d["encoder"], d.get("options") or {}, tail_layers=int(d.get("tail_layers", 0)))
            installed = "+".join(f"{t.package}=={package_version(t.package)}" for t in enc.towers)
        except PretrainedModelError as exc:
            raise CheckpointError(
                f"{source}: the model's text branch is the pretrained sentence encoder "
                f"{d.get('encoder')!r} ({d.get('version')}): {exc}"
            ) from None
        except (KeyError, TypeError) as exc:
            raise CheckpointError(f"{source}: unreadable pretrained caption encoder ({exc!r})") from None
        except Exception as exc:  # noqa: BLE001 - e.g. an unknown encoder name from a newer polyvse
            raise CheckpointError(f"{source}: cannot rebuild the pretrained sentence encoder: {exc}") from None
        recorded = d.get("version", "")
        if installed != recorded:
            raise CheckpointError(
                f"{source}: the model's head was trained on {recorded} vectors, but {installed} is installed; "
                f"install the recorded version (`pip install {recorded.replace('+', ' ')}`)"
            )
        if int(d.get("dim", enc.dim)) != enc.dim:
            raise CheckpointError(f"{source}: recorded sentence-vector size {d.get('dim')} != {enc.name}'s {enc.dim}")
        return enc

    def __repr__(self) -> str:
        opts = json.dumps(self.options, sort_keys=True)
        return f"PretrainedCaptionEncoder({self.name!r}, options={opts}, cache_dir={self.cache_dir})"


def use_sentence_cache(model, root: str | os.PathLike | None):
    """``model`` (a loaded PolyvseModel) with its frozen sentence encoder reading and filling the sentence cache
    under ``root``'s cache root, so text-only tasks (STS, cross-lingual retrieval) embed each sentence once per
    encoder, not once per checkpoint; a model with a trained text encoder is returned unchanged."""
    if isinstance(model.captions, PretrainedCaptionEncoder) and model.captions.cache_dir is None:
        model.captions.cache_dir = sentence_cache_dir(root)
    return model
