"""`polyvse model build`'s adaptation stage (polyvse.adaptation.plan): a trained checkpoint taught the plan's
languages one after another ends as one checkpoint serving them all, at the model's own path, with every old vector
bit for bit and the index built before the stage still accepting it; the stage's parallel files hold no evaluation
photo or sentence; a stopped stage resumes without redoing a finished language, a stop inside the swap is finished
by the next run, and a finished stage is not redone. The model is a smoke-trained USE-tower model with per-language
parts (en, de); the plan teaches es (teacher + subword student) and ar (plain teacher) from 200 MultiScript30k
lines each and leaves fr to the zero-shot fallback."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import polyvse
from polyvse.adaptation import plan as adaptation_plan
from polyvse.errors import CheckpointError
from test_adapt import base_checkpoint, script, tail_checkpoint  # noqa: F401  (the fixtures)

REPO = Path(__file__).resolve().parents[1]
EN, DE = ["a dog runs on the beach", "two children play football in a park"], ["ein Hund läuft am Strand"]
PLAN = """pivot: en
languages:
  - {lang: es, method: teacher+subwords, lines: 200, chosen: a test}
  - {lang: ar, method: teacher, lines: 200}
  - {lang: fr, method: zero-shot}
"""


@pytest.fixture(scope="module")
def trained(base_checkpoint) -> Path:
    """test_adapt's smoke-trained USE-tower model with parts for en and de."""
    return base_checkpoint


@pytest.fixture()
def model(trained, shared_data, tmp_path) -> Path:
    """A model folder as `make model` leaves it before the stage: the trained checkpoint and its index."""
    from polyvse.index import build_index
    from polyvse.util.paths import cache_root

    folder = tmp_path / "model"
    shutil.copytree(trained, folder / "checkpoint")
    photos = sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:5]
    build_index(
        polyvse.load(folder / "checkpoint"),
        photos,
        folder / "index",
        cache_dir=cache_root() / "features",
        progress=False,
    )
    (tmp_path / "plan.yaml").write_text(PLAN, encoding="utf-8")
    return folder


@pytest.fixture(autouse=True)
def one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def run_stage(model: Path, shared_data: Path, plan: Path | None = None) -> dict:
    plan = adaptation_plan.read_plan(plan or model.parent / "plan.yaml")
    return adaptation_plan.Stage(model, plan, str(shared_data), report=lambda s: None).run()


def test_the_stage_leaves_one_checkpoint_serving_every_language_that_the_old_index_accepts(model, trained, shared_data):
    from polyvse.index import PhotoIndex, Searcher, check_index_accepts
    from polyvse.languages import serving_status
    from polyvse.provenance import checkpoint_fingerprint, provenance_problems

    run_stage(model, shared_data)
    old, new = polyvse.load(trained), polyvse.load(model / "checkpoint")
    assert new.languages == ["en", "de", "es", "ar"] and set(new.adapted_languages) == {"es", "ar"}
    assert [serving_status(new, x) for x in ("en", "es", "ar", "fr")] == ["trained", "adapted", "adapted", "zero-shot"]
    assert new.subword_student("es") is not None and "subwords" not in new.adapted_languages["ar"]
    assert new.adapted_languages["es"]["lines"] == 200
    # the trained checkpoint is kept beside, untouched
    assert polyvse.load(model / "trained-checkpoint").languages == ["en", "de"]
    # every old vector bit for bit, and the index built before the stage serves the new languages
    assert np.array_equal(old.encode_text(EN, "en"), new.encode_text(EN, "en"))
    assert np.array_equal(old.encode_text(DE, "de"), new.encode_text(DE, "de"))
    feats = np.random.default_rng(0).standard_normal((3, old.config.image_dim)).astype(np.float32)
    assert np.array_equal(old.encode_image_features(feats), new.encode_image_features(feats))
    check_index_accepts(model / "index", new)  # the index's own check: no IndexMismatchError
    index = PhotoIndex.open(model / "index")
    for text, lang in (("un perro corre en la playa", "es"), ("كلب يجري على الشاطئ", "ar")):
        assert len(Searcher(new, index).text(text, lang, k=3).hits) == 3
    # the adapted parts, not the zero-shot fallback the trained model gives es and ar
    for text, lang in (("un perro corre", "es"), ("كلب يجري", "ar")):
        assert not np.allclose(new.encode_text([text], lang), old.encode_text([text], lang))
    record = json.loads((model / "adapted.json").read_text())
    assert provenance_problems(record["provenance"]) == []
    assert record["provenance"]["model"]["fingerprint"] == checkpoint_fingerprint(model / "checkpoint")
    assert set(record["languages"]) == {"es", "ar", "fr"} and record["languages"]["fr"]["method"] == "zero-shot"
    es = record["languages"]["es"]
    assert es["command"].startswith("polyvse adapt --checkpoint ") and "--subwords" in es["command"]
    assert es["adaptation"]["held_out_lines"] == 20 and es["seconds"]["adapt"] > 0 and es["chosen"] == "a test"
    assert "--no-subwords" in record["languages"]["ar"]["command"]
    assert not list((model / "adapt").glob("*.step.json")) and not list((model / "adapt").glob("[0-9]-*"))
    # a finished stage is not redone
    before = (model / "checkpoint" / "config.json").stat().st_mtime_ns
    run_stage(model, shared_data)
    assert (model / "checkpoint" / "config.json").stat().st_mtime_ns == before
    # the languages table of the adapted checkpoint: trained rows on f8k-full, adapted ones on their MultiScript30k
    # lines through their own parts, each saying how it was taught and chosen
    out = model.parent / "languages.json"
    assert (
        script("language_table").main(
            [
                "--checkpoint",
                str(model / "checkpoint"),
                "--langs",
                "es,ar",
                "--out",
                str(out),
                "--data-root",
                str(shared_data),
                "--max-photos",
                "10",
                "--splits",
                "test",
                "--plan",
                str(model.parent / "plan.yaml"),
                "--quiet",
            ]
        )
        == 0
    )
    table = json.loads(out.read_text())
    rows = table["rows"]
    assert list(rows) == ["en", "de", "es", "ar"] and rows["de"]["status"] == "trained"
    assert (rows["es"]["status"], rows["es"]["taught"], rows["es"]["chosen"]) == (
        "adapted",
        "teacher+subwords, 200 lines",
        "a test",
    )
    assert rows["ar"]["taught"] == "teacher, 200 lines" and "chosen" not in rows["ar"]
    assert 0 < rows["ar"]["test"]["n_images"] <= 10 and table["plan"].endswith("plan.yaml")
    stage = table["adaptation_stage"]  # the stage's record beside the checkpoint: each language's cost
    assert stage["languages"]["es"]["seconds"]["adapt"] > 0 and stage["languages"]["fr"] == {"method": "zero-shot"}
    from polyvse_train.report.languages import languages_markdown

    text = languages_markdown(table)
    assert "| adapted (teacher+subwords, 200 lines) |" in text and "es: a test; ar: not recorded" in text


def test_the_stage_files_hold_no_evaluation_photo_or_sentence(model, shared_data):
    from polyvse.adaptation import read_parallel_file
    from polyvse.adaptation.multiscript_lines import multiscript_pairs
    from polyvse.data.exclusion import evaluation_exclusion, evaluation_photo_ids

    stage = adaptation_plan.Stage(
        model, adaptation_plan.read_plan(model.parent / "plan.yaml"), str(shared_data), report=lambda s: None
    )
    path, written = stage.parallel_file(stage.plan.entries[1])  # ar
    assert path == model / "adapt" / "ar-en.tsv" and written["written"] == written["available"] > 20000
    lines = read_parallel_file(path).lines
    allowed = multiscript_pairs(shared_data, "ar", "en")

    def norm(text: str) -> str:  # a parallel file folds runs of spaces
        return " ".join(text.split())

    assert {(x.text, x.pivot_text) for x in lines} == {(norm(a), norm(b)) for a, b, _ in allowed}
    assert not {pid for _, _, pid in allowed} & evaluation_photo_ids(shared_data)
    exclusion = evaluation_exclusion(shared_data)
    assert not any(exclusion.excludes(None, x.text) or exclusion.excludes(None, x.pivot_text) for x in lines)


def test_a_stopped_stage_resumes_without_redoing_a_finished_language(model, shared_data, monkeypatch):
    taught = []
    real = adaptation_plan.Stage._adapt

    def stop_at_ar(self, entry, *args):
        if entry.lang == "ar":
            raise KeyboardInterrupt  # the stage stopped during ar
        taught.append(entry.lang)
        return real(self, entry, *args)

    monkeypatch.setattr(adaptation_plan.Stage, "_adapt", stop_at_ar)
    with pytest.raises(KeyboardInterrupt):
        run_stage(model, shared_data)
    assert (model / "adapt" / "1-es" / "config.json").is_file() and not (model / "adapted.json").exists()
    assert polyvse.load(model / "checkpoint").languages == ["en", "de"]  # nothing swapped in yet

    def count(self, entry, *args):
        taught.append(entry.lang)
        return real(self, entry, *args)

    monkeypatch.setattr(adaptation_plan.Stage, "_adapt", count)
    real_swap = adaptation_plan.Stage.swap

    def stop_inside_swap(self, adapted):
        import os

        os.replace(self.model / "checkpoint", self.model / "trained-checkpoint")  # the first rename, then a stop
        raise KeyboardInterrupt

    monkeypatch.setattr(adaptation_plan.Stage, "swap", stop_inside_swap)
    with pytest.raises(KeyboardInterrupt):
        run_stage(model, shared_data)
    assert taught == ["es", "ar"] and not (model / "checkpoint").exists()
    monkeypatch.setattr(adaptation_plan.Stage, "swap", real_swap)
    run_stage(model, shared_data)  # finishes the swap: no language taught again
    assert taught == ["es", "ar"]
    assert set(polyvse.load(model / "checkpoint").adapted_languages) == {"es", "ar"}
    record = json.loads((model / "adapted.json").read_text())
    assert record["languages"]["es"]["chosen"] == "a test"  # the record of the step done before the stops


def test_the_stage_refuses_an_adapted_checkpoint_the_index_would_not_accept(model, shared_data):
    manifest = model / "index" / "manifest.json"
    data = json.loads(manifest.read_text())
    for key in ("fingerprint", "photo_fingerprint"):  # an index another model built
        if key in data["model"]:
            data["model"][key] = "sha256:" + "0" * 64
    manifest.write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match="refuses the adapted checkpoint.*nothing was swapped"):
        run_stage(model, shared_data)
    assert polyvse.load(model / "checkpoint").languages == ["en", "de"] and not (model / "adapted.json").exists()


@pytest.mark.parametrize(
    "text,message",
    [
        ("languages: []\n", "needs 'languages'"),
        ("languages:\n  - {lang: es, method: magic}\n", "method 'magic': choose one of"),
        ("languages:\n  - {lang: es, method: teacher}\n  - {lang: spa, method: teacher}\n", "es is listed twice"),
        ("languages:\n  - {lang: qu, method: teacher, lines: 0}\n", "lines must be a positive whole number"),
        ("languages:\n  - {lang: xx1, method: teacher}\n", "unknown language code"),
        ("pivot: zh\nlanguages:\n  - {lang: qu, method: teacher}\n", "pivot 'zh'"),
    ],
)
def test_a_bad_plan_is_refused_saying_what_is_wrong(tmp_path, text, message):
    from polyvse.errors import PolyvseError

    path = tmp_path / "plan.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolyvseError, match=re.escape(message)):
        adaptation_plan.read_plan(path)


def test_make_model_builds_with_the_product_plan():
    from polyvse_app.commands.model import PRODUCT_PLAN
    from polyvse_train.config.packaged import PLAN, resolve_config

    plan = adaptation_plan.read_plan(resolve_config(PRODUCT_PLAN, kind=PLAN))
    assert [e.lang for e in plan.entries] == ["qu", "gn", "es", "ar"] and plan.pivot == "en"
    assert {e.lang: e.method for e in plan.entries}["qu"] == "teacher+subwords"
    dry = subprocess.run(
        ["make", "-n", "-o", "setup", "-o", "data", "model", "MODEL_THREADS=1", "MODEL_PRECISION=fp32"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"polyvse model build --out runs/model --precision fp32 \\\n\s*--threads 1", dry), dry


def test_the_product_plan_teaches_its_languages_through_the_trained_text_tail(tail_checkpoint, shared_data, tmp_path):
    """configs/adapt/product.yaml's languages and methods (a few lines each) on a model that fine-tuned e5's last
    layer, as the product does: Quechua and Guarani, which only e5 reads, and Spanish and Arabic all end in one
    checkpoint that the index built before accepts and that answers a search in each."""
    from polyvse.index import PhotoIndex, Searcher, build_index
    from polyvse.languages import serving_status
    from polyvse.util.paths import cache_root

    plan = adaptation_plan.read_plan(REPO / "configs" / "adapt" / "product.yaml")
    small = tmp_path / "plan.yaml"
    small.write_text(
        "pivot: en\nlanguages:\n"
        + "".join(f"  - {{lang: {e.lang}, method: {e.method}, lines: 120}}\n" for e in plan.entries),
        encoding="utf-8",
    )
    folder = tmp_path / "model"
    shutil.copytree(tail_checkpoint, folder / "checkpoint")
    photos = sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:4]
    build_index(
        polyvse.load(folder / "checkpoint"),
        photos,
        folder / "index",
        cache_dir=cache_root() / "features",
        progress=False,
    )
    run_stage(folder, shared_data, small)
    model, index = polyvse.load(folder / "checkpoint"), PhotoIndex.open(folder / "index")
    taught = [e.lang for e in plan.taught]
    assert set(model.adapted_languages) == set(taught) and model.captions.tail_layers == 1
    queries = {
        "qu": "iskay allqukuna rit'ipi pukllachkanku",
        "gn": "mokõi jagua ohuga ama'ẽme",
        "es": "dos perros juegan en la nieve",
        "ar": "كلبان يلعبان في الثلج",
        "en": EN[0],
        "de": DE[0],
    }
    for lang, text in queries.items():
        assert serving_status(model, lang) == ("adapted" if lang in taught else "trained")
        assert len(Searcher(model, index).text(text, lang, k=2).hits) == 2, lang
