"""Training with a frozen pretrained sentence encoder as the text tower (``text_encoder: pretrained``).

The encoder (``pretrained_encoder``: e5-small, use-multilingual) never trains: every caption is embedded once,
through the content-keyed embedding cache under ``<cache root>/sentences`` (``$POLYVSE_CACHE`` or
``<data root>/cache``), so the first run on a dataset pays for the embeddings and later runs read them in
seconds. What trains is the head (``text_head``: linear, or an MLP with ``hidden_dim`` units), optionally after
MULE's per-language universal projection (``universal_dim``), against the image head with the objective's loss.
With ``text_finetune_layers: k`` e5's last k layers train too (``polyvse.modules.pretrained.e5.tail``): the cache
then holds the hidden states entering them (``polyvse.modules.pretrained.e5.states_cache``, beside the sentence vectors) instead of e5's vectors.
"""

from __future__ import annotations

from pathlib import Path

from polyvse.errors import DataError
from polyvse.modules.pretrained import available_pretrained_encoders, tower_names
from polyvse.modules.pretrained.cache import sentence_cache_dir
from polyvse.modules.pretrained.captions import PretrainedCaptionEncoder

#: options about word embeddings, which a pretrained tower does not have: (field, value that means "off")
WORD_LEVEL_OPTIONS = (("word_init", "random"), ("freeze_word_embeddings", False), ("align", False), ("word_l2", 0.0))


def uses_pretrained_tower(cfg) -> bool:
    return cfg.model.text_encoder == "pretrained"


def check_pretrained_config(cfg) -> None:
    """Errors naming the field for settings a frozen sentence encoder cannot honour."""
    towers = tower_names(cfg.model.pretrained_encoder)
    if not all(t in available_pretrained_encoders() for t in towers) or len(set(towers)) != len(towers):
        raise DataError(
            f"text_encoder pretrained needs pretrained_encoder: one of "
            f"{', '.join(available_pretrained_encoders())}, or several joined by + to fuse them "
            f"(got {cfg.model.pretrained_encoder!r})"
        )
    if cfg.model.tower_dropout and len(towers) < 2:
        raise DataError(f"tower_dropout {cfg.model.tower_dropout}: only with fused towers (pretrained_encoder: a+b)")
    if cfg.model.text_sharing != "shared":
        raise DataError(
            "text_encoder pretrained has one head for all languages: set text_sharing: shared "
            "(universal_dim > 0 adds MULE's per-language projection before it)"
        )
    for name, off in WORD_LEVEL_OPTIONS:
        if cfg.get(name) != off:
            raise DataError(
                f"{name} acts on word embeddings, which text_encoder pretrained does not have; "
                f"set {name}: {off!r} or use a word-level text_encoder (gru, lstm, mean)"
            )
    if cfg.objective.name == "translator":  # its map and its stages act on word embeddings
        raise DataError(
            "objective translator maps word embeddings, which text_encoder pretrained does not have; "
            "use objective vse or a word-level text_encoder"
        )
    if cfg.data.text_corpus != "none":
        raise DataError(
            "text_corpus feeds word ids of text-only captions, which text_encoder pretrained does not "
            "read: set text_corpus: none (embedding a text corpus with the frozen encoder is not "
            "supported yet)"
        )
    # MULE's sentence-level terms read u, the head's input: without a universal projection that is the frozen
    # vector itself, which no loss can move.
    mule = cfg.objective.options if cfg.objective.name == "mule" else None
    if not cfg.model.universal_dim and mule is not None and (mule.lc_weight > 0 or mule.lp_epochs > 0):
        which = "lc_weight (the adversarial language classifier)" if mule.lc_weight > 0 else "lp_epochs (LP)"
        raise DataError(
            f"{which} acts on the universal embedding u, which for text_encoder pretrained is the "
            "frozen sentence vector unless universal_dim > 0 adds MULE's learned per-language "
            "projection: set universal_dim (e.g. 512)"
        )
    from polyvse.modules.pretrained import get_pretrained_encoder

    covered = frozenset().union(*(get_pretrained_encoder(t).languages for t in towers))
    missing = [lang for lang in cfg.data.languages if lang not in covered]
    if missing:
        raise DataError(
            f"pretrained_encoder {cfg.model.pretrained_encoder} was not trained on {', '.join(missing)}; "
            f"remove {'it' if len(missing) == 1 else 'them'} from languages (it covers "
            f"{', '.join(sorted(covered))})"
        )


def pretrained_caption_encoder(cfg, root: Path, progress: bool = True) -> PretrainedCaptionEncoder:
    """The caption encoder of a pretrained-tower run: cached sentence vectors of cfg.model.pretrained_encoder."""
    check_pretrained_config(cfg)
    return PretrainedCaptionEncoder(
        cfg.model.pretrained_encoder,
        cache_dir=sentence_cache_dir(root),
        progress=progress,
        tail_layers=cfg.model.text_finetune_layers,
    )
