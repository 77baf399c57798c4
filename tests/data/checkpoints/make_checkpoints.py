"""Write the tiny checkpoints of tests/data/checkpoints/ and what the code that wrote them embeds for fixed inputs
(``expected.npz``), so tests/test_saved_checkpoints.py can check that later code loads checkpoints written before
it moved its modules, and embeds as the writer did.

    PYTHONPATH=src python tests/data/checkpoints/make_checkpoints.py tests/data/checkpoints

Run from a checkout of the commit the checkpoints are to come from (MADE.json records it); the checkpoints are
built by the test suite's own helpers of that commit (``trained_checkpoint``: a word-level model trained a few
steps; ``tower_checkpoint``: random heads on the frozen e5 + USE towers, with an adapted language and CSLS banks)
and only public calls (``polyvse.load``, ``polyvse.model.loading.query_model``) embed, so the script runs at any
commit since those existed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))

#: checkpoint name -> (helper, its keyword arguments)
KINDS = {
    "word-gru": ("trained", {}),
    "word-mule-lstm": ("trained", dict(text_encoder="lstm", universal_dim=7)),
    "word-translator-map": ("trained", dict(language_map=["de"])),
    "word-order-mlp": ("trained", dict(similarity="order", image_head="mlp", image_hidden_dim=16)),
    "tower-linear-csls-adapted": ("tower", dict(text_head="linear", csls=True)),
}


def queries(kind: str) -> list[tuple[str, str]]:
    if kind == "trained":
        from test_text_query import QUERIES
    else:
        from test_tower_query import QUERIES
    return list(QUERIES)


def embeddings(path: Path, kind: str) -> dict[str, np.ndarray]:
    """What the torch model (``polyvse.load``) and the numpy query model embed for the kind's queries and for
    three fixed image-feature rows."""
    import polyvse
    from polyvse.model.loading import query_model

    model = polyvse.load(path, device="cpu")
    out = {}
    for i, (lang, text) in enumerate(queries(kind)):
        out[f"torch_text_{i}"] = model.encode_text([text], lang)
        numpy_model = query_model(path)
        if numpy_model is not None:
            out[f"numpy_text_{i}"] = numpy_model.encode_text([text], lang)
    feats = np.random.default_rng(0).normal(size=(3, model.model.config.image_dim)).astype(np.float32)
    out["image_features"], out["image"] = feats, model.encode_image_features(feats)
    return out


def main(out_dir: str) -> None:
    out = Path(out_dir)
    expected = {}
    for name, (kind, config) in KINDS.items():
        path = out / name
        if kind == "trained":
            from test_text_query import trained_checkpoint

            trained_checkpoint(path, seed=0, **config)
        else:
            from test_tower_query import tower_checkpoint

            tower_checkpoint(path, seed=0, **config)
        expected.update({f"{name}/{k}": v for k, v in embeddings(path, kind).items()})
    np.savez_compressed(out / "expected.npz", **expected)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=TESTS).stdout.strip()
    (out / "MADE.json").write_text(
        json.dumps(
            {
                "commit": commit or None,
                "command": "PYTHONPATH=src python tests/data/checkpoints/make_checkpoints.py tests/data/checkpoints",
                "kinds": {name: {"helper": kind, "config": config} for name, (kind, config) in KINDS.items()},
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main(sys.argv[1])
