"""scripts/service_walkthrough.py, the runner of the docs/service.md template (docs/templates/service.md).

End to end: a tiny untrained model (the real image backbone, a vocabulary of the walkthrough's queries) over a
handful of real F8K-ML test photos; `polyvse serve` runs as a real subprocess. Checks that the page has every
section, that every bad request got a 4xx, and that no absolute path of the machine (the temporary folders)
leaks into it. And without running anything: the committed page is the template filled with what the run that
wrote it recorded (docs/templates/service.outputs.json), so the template and the page cannot drift apart.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
N_PHOTOS = 6

BAD_INPUTS = [
    "empty query",
    "10 kB query",
    "unknown language",
    "a one-word query, language auto",
    "a language the model does not know",
    "k out of range",
    "not an image (a text file sent as a JPEG)",
    "upload declared as text",
    "truncated JPEG (the first 3000 bytes of a photo)",
    "50-megapixel image (a PNG of 10000 × 5000 pixels)",
    "100-megapixel image (a PNG of 10000 × 10000 pixels)",
    "body over the upload limit (9 MiB)",
    "path traversal, encoded",
    "path traversal in the static files (raw path, not normalised by the client)",
    "path traversal in the thumbnail route",
    "unknown photo id",
]


def _script():
    spec = importlib.util.spec_from_file_location("service_walkthrough", REPO / "scripts" / "service_walkthrough.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _tiny_data_root(shared_data: Path, root: Path) -> Path:
    """A data root with N_PHOTOS real test-split photos; the caption corpora are links to the read-only mirror."""
    images = root / "flickr8k" / "images"
    images.mkdir(parents=True)
    for name in ("multi30k", "flickr8kcn", "multiscript30k"):  # the page's parallel file comes from multiscript30k
        (root / name).symlink_to(shared_data / name)
    test_ids = set((shared_data / "flickr8kcn" / "data" / "flickr8ktest.txt").read_text().split())
    photos = sorted(p for p in (shared_data / "flickr8k" / "images").glob("*.jpg") if p.stem in test_ids)[:N_PHOTOS]
    for p in photos:
        shutil.copyfile(p, images / p.name)
    # Flickr8K's caption file names only the photos at hand
    lines = (shared_data / "flickr8k" / "captions.txt").read_text(encoding="utf-8").splitlines()
    kept = [lines[0]] + [line for line in lines[1:] if line.split(",", 1)[0] in {p.name for p in photos}]
    (root / "flickr8k" / "captions.txt").write_text("\n".join(kept) + "\n", encoding="utf-8")
    # every Flickr8K caption: what the evaluation exclusion of `polyvse data parallel` reads
    (root / "flickr8k" / "all_captions.txt").symlink_to(shared_data / "flickr8k" / "all_captions.txt")
    return root


def _tiny_checkpoint(script, out: Path) -> Path:
    """An untrained model with the real backbone's feature key and a vocabulary covering the page's queries."""
    from polyvse.features.backbones import get_extractor
    from polyvse.model.checkpoint import Checkpoint, save_checkpoint
    from polyvse.modules import JointEmbeddingModel, ModelConfig
    from polyvse.modules.text_input import CaptionEncoder

    torch.manual_seed(0)
    extractor = get_extractor("efficientnet-lite0")
    enc = CaptionEncoder.build(
        {
            "en": [script.ENGLISH, "a dog"],
            "de": [script.GERMAN],
            "fr": [script.FRENCH, "un homme fait du vélo"],
            "cs": ["dva psi si hrají ve sněhu"],
            "zh": [script.CHINESE],
        }
    )
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=len(enc.vocab), image_dim=extractor.dim, embed_dim=16, word_dim=8, hidden_dim=16)
    )
    save_checkpoint(
        Checkpoint(
            model=model.eval(),
            captions=enc,
            backbone="efficientnet-lite0",
            feature_key=extractor.key,
            ten_crop=False,
            languages=["en", "de", "fr", "cs", "zh"],
            training={
                "data": "f8k-ml",
                "split": "none (untrained test model)",
                "seed": 0,
                "commit": "test",
                "config": {"name": "walkthrough-tiny"},
            },
        ),
        out,
    )
    return out


def test_the_committed_page_is_its_template_filled_with_the_recorded_outputs():
    script = _script()
    page = REPO / "docs" / "service.md"
    recorded = json.loads(script.outputs_path(page).read_text(encoding="utf-8"))
    template = script.TEMPLATE.read_text(encoding="utf-8")
    assert sorted(recorded["blocks"]) == sorted(set(script.RUN_MARKER.findall(template)))
    assert script.render(template, recorded["blocks"], recorded["values"]) == page.read_text(encoding="utf-8")


def test_the_committed_page_ran_on_the_product_build_on_a_clean_tree():
    from polyvse_train.report.product_build import mismatch

    script = _script()
    recorded = json.loads(script.outputs_path(REPO / "docs" / "service.md").read_text(encoding="utf-8"))
    provenance = recorded.get("provenance")
    assert provenance, "docs/templates/service.outputs.json has no provenance: run `make walkthrough` again"
    assert provenance["dirty"] is False, f"the walkthrough ran on uncommitted changes: {provenance['dirty_files']}"
    assert mismatch(REPO, provenance["model"]) is None, mismatch(REPO, provenance["model"])


def test_the_refused_language_is_one_the_served_model_does_not_read():
    script = _script()
    assert script.unserved_language(["en", "de", "fr", "cs", "zh", "es"]) == "qu"  # before adaptation
    assert script.unserved_language(["en", "de", "qu", "gn", "es", "ar"]) == "ay"  # the product, taught qu and gn
    with pytest.raises(script.WalkthroughError, match="add a language to UNSERVED"):
        script.unserved_language(script.UNSERVED)


def test_every_run_marker_is_a_step_and_a_missing_value_is_an_error():
    import jinja2

    script = _script()
    for name in script.RUN_MARKER.findall(script.TEMPLATE.read_text(encoding="utf-8")):
        assert callable(getattr(script.Walkthrough, f"step_{name}", None)), name
    assert script.render("a {{ x }}\n<!-- run: b -->\n", {"b": "```\nB\n```"}, {"x": 1}) == "a 1\n```\nB\n```\n"
    with pytest.raises(jinja2.UndefinedError):
        script.render("a {{ missing }}\n", {}, {})


def test_walkthrough_writes_the_page_with_every_section(shared_data, tmp_path, capsys):
    script = _script()
    root = _tiny_data_root(shared_data, tmp_path / "data")
    checkpoint = _tiny_checkpoint(script, tmp_path / "checkpoint")
    doc = tmp_path / "docs" / "service.md"
    code = script.main(
        [
            "--checkpoint",
            str(checkpoint),
            "--data-root",
            str(root),
            "--work",
            str(tmp_path / "work"),
            "--out",
            str(doc),
            "--outputs",
            str(tmp_path / "work" / "outputs.json"),
            "--port",
            "0",
            "--workers",
            "0",
        ]
    )
    assert code == 0, capsys.readouterr().err
    text = doc.read_text(encoding="utf-8")
    # what filled the page, a record of the run: its checkout, machine and the model that answered
    from polyvse.provenance import checkpoint_model, provenance_problems

    outputs = json.loads((tmp_path / "work" / "outputs.json").read_text(encoding="utf-8"))
    assert script.render(script.TEMPLATE.read_text(encoding="utf-8"), outputs["blocks"], outputs["values"]) == text
    block = outputs["provenance"]
    assert provenance_problems(block) == []
    assert block["model"]["fingerprint"] == checkpoint_model(checkpoint)["fingerprint"]

    for heading in (
        "## 1. Build an index",
        "## 2. Search from the command line",
        "## 3. Teach the model a new language",
        "## 4. Add photos",
        "## 5. From Python",
        "## 6. The HTTP service and its web page",
        "## 7. Tests",
        "## 8. Load test",
    ):
        assert heading in text, heading
    for command in (
        "$ polyvse index build --checkpoint <checkpoint> --images $POLYVSE_DATA/flickr8k/images",
        "$ polyvse index info --index <work>/index",
        "$ polyvse index add --index <work>/index",
        f"'{script.GERMAN}' --lang de",
        "--lang auto",
        "--image $POLYVSE_DATA/flickr8k/images/",
        "$ polyvse data export",
        "$ polyvse serve --index <work>/index",
        f"--lang {script.NEW_LANG}",
        f"$ polyvse data parallel --lang {script.NEW_LANG}",
        "$ polyvse adapt --checkpoint <checkpoint>",
    ):
        assert command in text, command
    # a word-level model: Spanish and the new language refused, adapt refused saying why
    assert "was refused: this\nmodel reads only the languages it trained on" in text
    assert "This checkpoint is word-level, so `polyvse adapt` refuses it" in text
    assert f"{N_PHOTOS} photos indexed" in text and "2 photos added" in text
    assert f"photos:     {N_PHOTOS}" in text
    assert "Uvicorn running on http://127.0.0.1:" in text
    # metadata of the checkpoint, and the requests of the service section
    assert "split `none (untrained test model)`" in text and "commit `test`" in text
    for request in (
        "POST /api/search/text",
        "POST /api/search/image",
        "POST /api/captions/image",
        "GET /api/health",
        "GET /api/model",
    ):
        assert f"\n{request}" in text, request
    assert text.count("\n200 OK") >= 6
    assert '"took_ms"' not in text
    # every bad request: labelled, then the request line, then a 4xx with a message
    for label in BAD_INPUTS:
        m = re.search(re.escape(f"# {label}\n") + r"[^\n]+\n(\d{3}) [^\n]*\{\"detail\": \"[^\"]+", text)
        assert m, label
        assert 400 <= int(m.group(1)) < 500, (label, m.group(1))
    assert not re.search(r"\n5\d\d ", text)
    # no absolute path of this machine
    for path in (tmp_path, shared_data, REPO):
        assert str(path) not in text, path
    assert "/tmp/" not in text
    assert not list(doc.parent.glob(".*"))  # the atomic write left no temporary file
