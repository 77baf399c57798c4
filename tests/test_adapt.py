"""polyvse adapt (polyvse.adaptation): a frozen-tower model taught a new language from sentence pairs keeps every old
vector and its photo index, serves the new language, learns it better than zero-shot on held-out pairs, resumes a
stopped run exactly, and names every bad line of a parallel file. The model is a smoke-trained USE-tower model with
per-language parts (USE embeds a few hundred sentences in seconds), and one that fine-tuned e5's last layer, whose
new language learns from (and is served through) the trained layer; the pairs are MultiScript30k's es lines with
their Multi30K en line, evaluation photos and sentences left out."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import polyvse
from polyvse.adaptation import AdaptRequest, ParallelFileError, TeacherSettings, adapt_language, read_parallel_file
from polyvse.adaptation.adapt import state_path_of
from polyvse.adaptation.adapted_checkpoint import check_adaptable
from polyvse.errors import CheckpointError
from polyvse.modules.pretrained import get_pretrained_encoder
from polyvse_app.cli import main

EN = ["a dog runs on the beach", "two children play football in a park"]
DE = ["ein Hund läuft am Strand"]


@pytest.fixture(scope="module")
def base_checkpoint(shared_data, tmp_path_factory) -> Path:
    from polyvse_train.config import TrainConfig
    from polyvse_train.train import train

    out = tmp_path_factory.mktemp("adapt-base")
    cfg = TrainConfig(
        name="adapt-test",
        languages=["en", "de"],
        text_encoder="pretrained",
        pretrained_encoder="use-multilingual",
        universal_dim=32,
        embed_dim=16,
        smoke_photos=8,
        smoke_max_batches=2,
        threads=1,
    )
    train(cfg, out, shared_data, smoke=True, progress=False)
    return out / "checkpoint"


@pytest.fixture(scope="module")
def es_pairs(shared_data, tmp_path_factory) -> Path:
    from polyvse.adaptation.multiscript_lines import write_multiscript_parallel

    path = tmp_path_factory.mktemp("adapt-data") / "es-en.tsv"
    done = write_multiscript_parallel(shared_data, "es", path, "en", lines=240)
    assert done["written"] == 240 and done["available"] > 20000
    return path


def script(name: str):
    """scripts/<name>.py as a module (scripts/ on the path while it loads, for the scripts' own imports)."""
    import importlib.util
    import sys

    scripts = Path(__file__).parents[1] / "scripts"
    sys.path.insert(0, str(scripts))
    try:
        spec = importlib.util.spec_from_file_location(name, scripts / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(scripts))
    return module


def request(ck: Path, pairs: Path, out: Path, **over) -> AdaptRequest:
    return AdaptRequest(checkpoint=ck, lang="es", parallel=pairs, out=out, progress=False, **over)


def test_bad_lines_are_named_by_file_and_line(tmp_path):
    tsv = tmp_path / "qu.tsv"
    tsv.write_text("qu\ten\nallqo\ta dog\n\nwasi\thouse\textra\nmayu\t \n", encoding="utf-8")
    with pytest.raises(ParallelFileError) as err:
        read_parallel_file(tsv)
    message = str(err.value)
    assert f"{tsv}:4: 3 tab-separated field(s), expected 2" in message
    assert f"{tsv}:5: the counterpart sentence is empty" in message and "--skip-bad-lines" in message
    kept = read_parallel_file(tsv, skip_bad_lines=True)
    assert [(x.line, x.text, x.pivot_text, x.pivot_lang) for x in kept.lines] == [(2, "allqo", "a dog", "en")]
    assert len(kept.problems) == 2 and kept.skipped_empty == 1

    jsonl = tmp_path / "gn.jsonl"
    jsonl.write_text(
        '{"text": "jagua", "pivot_text": "un perro", "pivot_lang": "es"}\n{"text": "x"\n'
        '{"text": "y"}\n["a", "b"]\n{"text": 3, "pivot_text": "z"}\n',
        encoding="utf-8",
    )
    with pytest.raises(ParallelFileError) as err:
        read_parallel_file(jsonl)
    message = str(err.value)
    for line, what in ((2, "not JSON"), (3, 'no "pivot_text" field'), (4, "a JSON list"), (5, '"text" is a int')):
        assert f"{jsonl}:{line}: {what}" in message
    assert read_parallel_file(jsonl, skip_bad_lines=True).lines[0].pivot_lang == "es"


def test_adapted_model_keeps_old_vectors_and_index_and_serves_the_new_language(
    base_checkpoint, es_pairs, tmp_path, shared_data
):
    from polyvse.index import PhotoIndex, Searcher, build_index
    from polyvse.index.fingerprint import model_fingerprint, photo_fingerprint
    from polyvse.util.paths import cache_root

    out = tmp_path / "adapted"
    record = adapt_language(request(base_checkpoint, es_pairs, out, method="procrustes"), report=lambda s: None)
    old, new = polyvse.load(base_checkpoint), polyvse.load(out)
    assert new.languages == ["en", "de", "es"] and new.adapted_languages["es"]["method"] == "procrustes"
    assert record["lines"] == 240 and json.loads((out / "config.json").read_text())["adapted_languages"]["es"]
    # old languages and photos: bit for bit
    assert np.array_equal(old.encode_text(EN, "en"), new.encode_text(EN, "en"))
    assert np.array_equal(old.encode_text(DE, "de"), new.encode_text(DE, "de"))
    feats = np.random.default_rng(0).standard_normal((3, old.config.image_dim)).astype(np.float32)
    assert np.array_equal(old.encode_image_features(feats), new.encode_image_features(feats))
    # an index built with the old checkpoint serves the adapted one, in the new language: the photo side is the
    # same, the model is not
    assert photo_fingerprint(old) == photo_fingerprint(new) and model_fingerprint(old) != model_fingerprint(new)
    photos = sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:5]
    build_index(old, photos, tmp_path / "index", cache_dir=cache_root() / "features", progress=False)
    hits = Searcher(new, PhotoIndex.open(tmp_path / "index")).text("un perro corre en la playa", "es", k=3).hits
    assert len(hits) == 3
    # the new language goes through its own part, not the zero-shot fallback the old model uses for es
    assert not np.allclose(new.encode_text(["un perro corre"], "es"), old.encode_text(["un perro corre"], "es"))


def test_teacher_learns_the_language_better_than_zero_shot_on_held_out_pairs(base_checkpoint, es_pairs, tmp_path):
    record = adapt_language(
        request(base_checkpoint, es_pairs, tmp_path / "teacher", teacher=TeacherSettings(epochs=40)),
        report=lambda s: None,
    )
    scores = record["held_out_translation_mr"]
    assert record["held_out_lines"] == 24 and record["best_epoch"] > 0
    assert scores["adapted"] > scores["zero_shot"] + 5, scores
    assert not state_path_of(tmp_path / "teacher").exists()  # removed once the checkpoint is written
    assert "subwords" in record  # the teacher's default student, in a language the towers document too (es)


@pytest.mark.parametrize(
    "subwords,dropout", [(False, 0.0), (True, 0.0), (True, 0.3)], ids=["linear", "subwords", "subwords-dropout"]
)
def test_a_stopped_teacher_run_resumes_to_the_same_part(
    base_checkpoint, es_pairs, tmp_path, monkeypatch, subwords, dropout
):
    import polyvse.adaptation.teacher as teacher

    settings = TeacherSettings(
        epochs=4, batch_size=64, subwords=subwords, subword_buckets=2048, subword_dim=8, subword_dropout=dropout
    )
    adapt_language(request(base_checkpoint, es_pairs, tmp_path / "whole", teacher=settings), report=lambda s: None)
    real_save, saved = teacher.save_training_state, []

    def save_then_stop(state, path):
        real_save(state, path)
        saved.append(state["epoch"])
        if state["epoch"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(teacher, "save_training_state", save_then_stop)
    out = tmp_path / "stopped"
    with pytest.raises(KeyboardInterrupt):
        adapt_language(request(base_checkpoint, es_pairs, out, teacher=settings), report=lambda s: None)
    assert state_path_of(out).is_file() and not out.exists()
    adapt_language(request(base_checkpoint, es_pairs, out, teacher=settings, resume=True), report=lambda s: None)
    assert saved == [1, 2, 3, 4]  # epochs 1-2, then 3-4 after the resume
    whole, resumed = polyvse.load(tmp_path / "whole"), polyvse.load(out)
    assert np.array_equal(whole.encode_text(["un perro corre"], "es"), resumed.encode_text(["un perro corre"], "es"))
    # a state of another run is refused, not silently mixed in
    with pytest.raises(KeyboardInterrupt):
        adapt_language(request(base_checkpoint, es_pairs, tmp_path / "other", teacher=settings), report=lambda s: None)
    with pytest.raises(CheckpointError, match="another adaptation"):
        adapt_language(
            request(base_checkpoint, es_pairs, tmp_path / "other", teacher=settings, lines=200, resume=True),
            report=lambda s: None,
        )


def test_subword_student_learns_and_serves_alike_in_torch_and_numpy(base_checkpoint, es_pairs, tmp_path):
    from polyvse.index.fingerprint import legacy_fingerprint, model_fingerprint, photo_fingerprint
    from polyvse.model.numpy_serving.tower_query import TowerQueryModel

    out = tmp_path / "subwords"
    settings = TeacherSettings(epochs=40, subwords=True, subword_buckets=4096, subword_dim=16)
    record = adapt_language(request(base_checkpoint, es_pairs, out, teacher=settings), report=lambda s: None)
    scores = record["held_out_translation_mr"]
    assert record["subwords"] == {"buckets": 4096, "dim": 16, "min_n": 3, "max_n": 5, "word_ngrams": 3}
    assert scores["adapted"] > scores["zero_shot"] + 5, scores
    old, new, fast = polyvse.load(base_checkpoint), polyvse.load(out), TowerQueryModel.load(out)
    es = ["un perro corre en la playa", "dos niños juegan", ""]
    assert np.allclose(new.encode_text(es, "es"), fast.encode_text(es, "es"), atol=1e-5)
    # the table is used: the same tower vectors through the Linear part alone give other vectors
    linear_only = adapt_language(
        request(base_checkpoint, es_pairs, tmp_path / "linear", teacher=TeacherSettings(epochs=1, subwords=False)),
        report=lambda s: None,
    )
    assert "subwords" not in linear_only
    assert not np.allclose(new.encode_text(es[:1], "es"), polyvse.load(tmp_path / "linear").encode_text(es[:1], "es"))
    # old languages and the photo index are untouched
    assert np.array_equal(new.encode_text(EN, "en"), old.encode_text(EN, "en"))
    assert photo_fingerprint(new) == photo_fingerprint(old) == photo_fingerprint(fast)
    assert model_fingerprint(new) == model_fingerprint(fast) != model_fingerprint(old)
    assert legacy_fingerprint(new) == model_fingerprint(old)  # what indexes and records held before
    # a procrustes map has no sentences to read
    with pytest.raises(polyvse.errors.DataError, match="subwords"):
        adapt_language(
            request(base_checkpoint, es_pairs, tmp_path / "map", method="procrustes", teacher=settings),
            report=lambda s: None,
        )


def test_subword_ids_are_stable_and_casefolded():
    from polyvse.model.subwords import SubwordSpec, bag_inputs, subword_ids, subword_term

    spec = SubwordSpec(buckets=1000, dim=4)
    ids = subword_ids("Wasi", spec)
    assert ids == subword_ids("wasi", spec) and all(0 <= i < 1000 for i in ids)
    assert len(ids) == 1 + 4 + 3 + 2  # the word, and the 3-, 4- and 5-grams of "<wasi>"
    assert subword_ids("", spec) == [] and subword_ids("?!", spec) == []
    flat, offsets = bag_inputs(["wasi", "", "wasi wasi"], spec)
    assert offsets.tolist() == [0, len(ids), len(ids)] and len(flat) == 3 * len(ids)
    table, up = np.arange(4000, dtype=np.float32).reshape(1000, 4), np.eye(4, dtype=np.float32)
    term = subword_term(["wasi", ""], table, up, spec)
    assert np.allclose(term[0], table[ids].mean(0)) and not term[1].any()
    # word pairs: one more row for each neighbouring pair; a spec stored before the field existed reads as words only
    pairs = SubwordSpec(buckets=1000, dim=4, word_ngrams=2)
    assert len(subword_ids("wasi wasi", pairs)) == 2 * len(ids) + 1 and subword_ids("wasi", pairs) == ids
    stored = {k: v for k, v in pairs.to_dict().items() if k != "word_ngrams"}
    assert SubwordSpec.from_dict(stored).word_ngrams == 1 and SubwordSpec.from_dict(pairs.to_dict()) == pairs


def test_subword_dropout_leaves_rows_out_in_training_only():
    from polyvse.model.subword_student import SubwordStudent, _drop_rows
    from polyvse.model.subwords import SubwordSpec

    flat, offsets = np.arange(10, dtype=np.int64), np.array([0, 4, 4, 7], dtype=np.int64)  # bags 4, 0, 3, 3
    kept, new_offsets = _drop_rows(flat, offsets, 0.5, np.random.default_rng(0))
    assert len(new_offsets) == 4 and 0 < len(kept) < 10 and set(kept) <= set(flat)
    bounds = list(new_offsets) + [len(kept)]
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):  # each sentence keeps only its own rows, in order
        own = flat[offsets[i] : (offsets[i + 1] if i + 1 < len(offsets) else len(flat))]
        assert set(kept[lo:hi]) <= set(own) and list(kept[lo:hi]) == sorted(kept[lo:hi])
    assert _drop_rows(flat, offsets, 0.0, np.random.default_rng(0))[0].tolist() == flat.tolist()
    student = SubwordStudent(torch.nn.Linear(4, 3), SubwordSpec(buckets=64, dim=2), dropout=0.9)
    torch.nn.init.normal_(student.table.weight)
    x, texts = torch.ones(2, 4), ["wasi runa", "allqu"]
    served = student.eval()(x, texts)
    assert torch.equal(served, student(x, texts))  # no dropout once served
    assert not torch.equal(served, student.train()(x, texts))
    with pytest.raises(ValueError, match="dropout"):
        SubwordStudent(torch.nn.Linear(4, 3), SubwordSpec(), dropout=1.0)


def test_zero_shot_fallback_is_a_load_option(base_checkpoint):
    mean = polyvse.load(base_checkpoint)
    assert mean.zero_shot == "mean" and mean.reads_zero_shot("es")
    as_en = polyvse.load(base_checkpoint, zero_shot="en")
    rows = as_en.captions.ids_many(["un perro corre"], "es")
    assert np.allclose(as_en.encode_text(["un perro corre"], "es"), as_en.encode_ids(rows, "en"), atol=1e-6)
    assert not np.allclose(mean.encode_text(["un perro corre"], "es"), as_en.encode_text(["un perro corre"], "es"))
    with pytest.raises(CheckpointError, match="en"):
        polyvse.load(base_checkpoint, zero_shot="off").encode_text(["un perro corre"], "es")
    with pytest.raises(CheckpointError, match="choose 'mean'"):
        polyvse.load(base_checkpoint, zero_shot="xx")


def test_cli_adapts_and_reports_bad_input(base_checkpoint, es_pairs, tmp_path, capsys):
    out = tmp_path / "cli"
    assert (
        main(
            [
                "adapt",
                "--checkpoint",
                str(base_checkpoint),
                "--lang",
                "es",
                "--parallel",
                str(es_pairs),
                "--out",
                str(out),
                "--method",
                "rcsls",
                "--lines",
                "100",
                "--quiet",
            ]
        )
        == 0
    )
    assert "held-out translation mR (10 pairs" in capsys.readouterr().out
    assert polyvse.load(out).adapted_languages["es"]["lines"] == 100
    bad = tmp_path / "bad.tsv"
    bad.write_text("perro\tdog\ngato\n", encoding="utf-8")
    assert (
        main(
            [
                "adapt",
                "--checkpoint",
                str(base_checkpoint),
                "--lang",
                "es",
                "--parallel",
                str(bad),
                "--out",
                str(tmp_path / "x"),
                "--quiet",
            ]
        )
        == 2
    )
    assert f"{bad}:2: 1 tab-separated field(s)" in capsys.readouterr().err
    assert (
        main(
            [
                "adapt",
                "--checkpoint",
                str(base_checkpoint),
                "--lang",
                "de",
                "--parallel",
                str(es_pairs),
                "--out",
                str(tmp_path / "y"),
                "--quiet",
            ]
        )
        == 2
    )
    assert "would replace a trained part" in capsys.readouterr().err
    assert (
        main(
            [
                "adapt",
                "--checkpoint",
                str(base_checkpoint),
                "--lang",
                "es",
                "--parallel",
                str(es_pairs),
                "--out",
                str(tmp_path / "z"),
                "--subwords",
                "--subword-word-ngrams",
                "0",
                "--quiet",
            ]
        )
        == 2
    )
    assert "--subword-word-ngrams must be at least 1" in capsys.readouterr().err
    assert (
        main(
            [
                "adapt",
                "--checkpoint",
                str(base_checkpoint),
                "--lang",
                "es",
                "--parallel",
                str(es_pairs),
                "--out",
                str(tmp_path / "z"),
                "--subword-dropout",
                "1",
                "--quiet",
            ]
        )
        == 2
    )
    assert "--subword-dropout must be in [0, 1)" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tail_checkpoint(shared_data, tmp_path_factory) -> Path:
    """A smoke-trained model that fine-tuned e5's last layer (as `make model`'s recipe does), with per-language
    parts for en and de."""
    from polyvse_train.config import TrainConfig
    from polyvse_train.train import train

    cfg = TrainConfig.load(Path(__file__).resolve().parents[1] / "configs" / "e5-frozen.yaml")
    cfg.data.languages = ["en", "de"]
    cfg.model.text_finetune_layers, cfg.model.universal_dim, cfg.model.embed_dim = 1, 32, 32
    cfg.smoke.photos, cfg.smoke.epochs, cfg.smoke.max_batches = 8, 1, 2
    cfg.schedule.batch_size, cfg.schedule.text_finetune_lr_scale = 16, 1.0  # the tail moves off e5's weights
    out = tmp_path_factory.mktemp("adapt-tail")
    train(cfg, out, shared_data, smoke=True, progress=False)
    return out / "checkpoint"


def test_a_model_with_a_text_tail_learns_a_language_through_its_trained_tail(tail_checkpoint, es_pairs, tmp_path):
    from polyvse.adaptation.line_vectors import line_vectors
    from polyvse.model.zero_shot import encode_through_part
    from polyvse.modules.pretrained.cache import sentence_cache_dir

    out = tmp_path / "adapted"
    record = adapt_language(
        request(tail_checkpoint, es_pairs, out, teacher=TeacherSettings(epochs=10)), report=lambda s: None
    )
    scores = record["held_out_translation_mr"]
    assert scores["adapted"] > scores["zero_shot"] + 5, scores
    old, new = polyvse.load(tail_checkpoint), polyvse.load(out)
    assert new.languages == ["en", "de", "es"] and new.captions.tail_layers == 1
    assert np.array_equal(old.encode_text(EN, "en"), new.encode_text(EN, "en"))
    # what the part learnt from (line vectors: e5's slice through the trained tail) is what serving feeds it
    texts = ["un perro corre en la playa", "dos niños juegan al fútbol"]
    vecs = line_vectors(new.captions, texts, "es", sentence_cache_dir(), False, new.model.text_encoder)
    with torch.no_grad():
        learnt_from = encode_through_part(new.model, torch.from_numpy(vecs), new.subword_student("es"), texts)
    np.testing.assert_allclose(new.encode_text(texts, "es"), learnt_from.numpy(), atol=1e-5)
    # the trained tail, not e5's own last layer, gives e5's slice
    untrained = get_pretrained_encoder("e5-small").encode(texts, "es", unlisted=True)
    assert not np.allclose(vecs[:, :384], untrained, atol=1e-3)
    with pytest.raises(CheckpointError, match="through the trained tail"):
        line_vectors(new.captions, texts, "es", sentence_cache_dir(), False)


def test_word_level_and_partless_models_are_refused_saying_why():
    word_level = SimpleNamespace(captions=SimpleNamespace(vocab=object()))
    with pytest.raises(CheckpointError, match="word-level checkpoint.*dictionary is not implemented"):
        check_adaptable(word_level, "qu")
    shared_head = SimpleNamespace(
        captions=SimpleNamespace(vocab=None), model=SimpleNamespace(config=SimpleNamespace(universal_dim=0))
    )
    with pytest.raises(CheckpointError, match="served zero-shot already"):
        check_adaptable(shared_head, "qu")


def test_data_parallel_command_writes_nested_files_without_evaluation_photos(shared_data, tmp_path):
    from polyvse.adaptation.multiscript_lines import multiscript_pairs
    from polyvse.data.exclusion import evaluation_photo_ids

    small, large = tmp_path / "qu-100.jsonl", tmp_path / "qu-300.tsv.gz"
    for path, n in ((small, 100), (large, 300)):
        assert (
            main(
                [
                    "data",
                    "parallel",
                    "--lang",
                    "qu",
                    "--lines",
                    str(n),
                    "--out",
                    str(path),
                    "--data-root",
                    str(shared_data),
                ]
            )
            == 0
        )
    a, b = read_parallel_file(small), read_parallel_file(large)
    assert len(a.lines) == 100 and len(b.lines) == 300
    assert [x.text for x in a.lines] == [x.text for x in b.lines[:100]]  # nested
    eval_ids = evaluation_photo_ids(shared_data)
    pairs = multiscript_pairs(shared_data, "qu")
    assert pairs and not {pid for _, _, pid in pairs} & eval_ids


def test_multi30k_languages_pair_with_the_pivot_without_evaluation_photos_or_sentences(shared_data):
    """Multi30K's own languages (de) pair line by line with the English pivot, as MultiScript30k's do, through the
    same exclusion: no evaluation photo, no evaluation sentence on either side."""
    from polyvse.adaptation.multiscript_lines import multiscript_pairs
    from polyvse.data._io import read_lines
    from polyvse.data.exclusion import evaluation_exclusion
    from polyvse.data.multi30k import caption_file_paths, image_list_path

    exclusion = evaluation_exclusion(shared_data)
    pairs = multiscript_pairs(shared_data, "de", "en", exclusion=exclusion)
    photos = [x.strip().rsplit(".", 1)[0] for x in read_lines(image_list_path(shared_data, "task1", "train"))]
    de, en = (read_lines(caption_file_paths(shared_data, "task1", "train", x)[0]) for x in ("de", "en"))
    assert len(photos) > len(pairs) > 0.9 * len(photos)  # some rows are left out, most kept
    row = {p: (d.strip(), e.strip()) for p, d, e in zip(photos, de, en)}
    assert all(row[p] == (t, e) for t, e, p in pairs[:500])  # aligned by photo
    assert not any(exclusion.excludes(p, t) or exclusion.excludes(p, e) for t, e, p in pairs)
    dropped = [p for p in photos if p not in {x[2] for x in pairs}]
    assert dropped and all(
        exclusion.excludes(p, row[p][0]) or exclusion.excludes(p, row[p][1]) or not all(row[p]) for p in dropped[:200]
    )


def test_learning_curve_script_records_zero_shot_and_adapted_scores(base_checkpoint, shared_data, tmp_path):
    curves = script("adapt_curves")
    out = tmp_path / "curves.json"
    assert (
        curves.main(
            [
                "--checkpoint",
                str(base_checkpoint),
                "--langs",
                "es",
                "--sizes",
                "60",
                "--methods",
                "procrustes,teacher",
                "--reference",
                "en",
                "--work",
                str(tmp_path / "work"),
                "--out",
                str(out),
                "--data-root",
                str(shared_data),
                "--max-photos",
                "12",
                "--quiet",
            ]
        )
        == 0
    )
    record = json.loads(out.read_text())
    assert set(record["zero_shot"]["es"]) == {"mean", "en", "de"}
    adapted = record["adapted"]["es"]["procrustes"]["60"]
    assert adapted["adaptation"]["lines"] == 60 and 0 <= adapted["test"]["mr"] <= 100
    assert "chosen_seeds" not in record  # no second seed asked for
    # the same folders again (reused), teacher alone: the trained choice gets its second seed, in a folder of its own
    assert (
        curves.main(
            [
                "--checkpoint",
                str(base_checkpoint),
                "--langs",
                "es",
                "--sizes",
                "60",
                "--methods",
                "teacher",
                "--reference",
                "en",
                "--work",
                str(tmp_path / "work"),
                "--out",
                str(out),
                "--data-root",
                str(shared_data),
                "--max-photos",
                "12",
                "--chosen-seeds",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    seeds = json.loads(out.read_text())["chosen_seeds"]["es"]
    assert seeds["method"] == "teacher" and set(seeds["seeds"]) == {"0", "1"}
    assert seeds["seeds"]["1"]["adaptation"]["seed"] == 1 and (tmp_path / "work" / "es-teacher-60-seed1").is_dir()
    assert record["reference"]["en"]["val"]["n_images"] == 12
    assert record["complete"] and record["languages_done"] == ["es"]
    from polyvse.provenance import checkpoint_fingerprint, provenance_problems

    assert provenance_problems(record["provenance"]) == []
    assert record["provenance"]["model"]["fingerprint"] == checkpoint_fingerprint(base_checkpoint)


def test_a_val_only_curve_scores_no_test_photo(base_checkpoint, shared_data, tmp_path):
    """--val-only: a choice made on val whose test figure comes later, from one evaluation of the model it goes into."""
    out = tmp_path / "choice.json"
    assert (
        script("adapt_curves").main(
            [
                "--checkpoint",
                str(base_checkpoint),
                "--langs",
                "es",
                "--sizes",
                "60",
                "--methods",
                "teacher,teacher+subwords",
                "--reference",
                "en",
                "--work",
                str(tmp_path / "work"),
                "--out",
                str(out),
                "--data-root",
                str(shared_data),
                "--max-photos",
                "12",
                "--val-only",
                "--quiet",
            ]
        )
        == 0
    )
    record = json.loads(out.read_text())
    assert record["splits"] == ["val"] and '"test"' not in json.dumps(record)
    assert (
        set(record["adapted"]["es"]) == {"teacher", "teacher+subwords"} and "val" in record["zero_shot"]["es"]["mean"]
    )
    assert record["reference"]["en"]["val"]["n_images"] == 12


def test_language_table_scores_trained_zero_shot_and_unserved_languages(base_checkpoint, shared_data, tmp_path):
    table = script("language_table")
    out = tmp_path / "languages.json"
    assert (
        table.main(
            [
                "--checkpoint",
                str(base_checkpoint),
                "--langs",
                "es,qu",
                "--out",
                str(out),
                "--data-root",
                str(shared_data),
                "--max-photos",
                "10",
                "--splits",
                "test",
                "--quiet",
            ]
        )
        == 0
    )
    record = json.loads(out.read_text())
    rows = record["rows"]
    from polyvse.provenance import provenance_problems

    assert provenance_problems(record["provenance"]) == []  # the checkout that scored it, the model it scored
    assert rows["en"]["status"] == "trained" and 0 <= rows["en"]["test"]["mr"] <= 100
    assert rows["es"]["status"] == "zero-shot" and rows["es"]["captions"].startswith("MultiScript30k")
    assert 0 < rows["es"]["test"]["n_images"] <= 10 and "val" not in rows["es"]  # photos with an es line
    assert rows["qu"]["status"] is None and "test" not in rows["qu"]  # USE reads no Quechua: not served


def test_a_subword_student_hashes_remembered_sentences_alike():
    from polyvse.model.subword_student import SubwordStudent
    from polyvse.model.subwords import SubwordSpec

    student = SubwordStudent(torch.nn.Linear(4, 3), SubwordSpec(buckets=512, dim=2, word_ngrams=3), seed=1)
    with torch.no_grad():
        student.table.weight.normal_()
    texts, vecs = ["pä anunakax anatapxi", "", "wasi"], torch.randn(3, 4)
    fresh = student(vecs, texts)
    student.remember(texts)
    assert torch.equal(student(vecs, texts), fresh) and torch.equal(student(vecs, ["otro", "", "wasi"])[1:], fresh[1:])
    student.forget()
    assert student._known is None and torch.equal(student(vecs, texts), fresh)


def test_leave_one_language_out_script_scores_mean_and_universal_parts(base_checkpoint, shared_data, tmp_path):
    """scripts/zero_shot_loo.py: a held-out unseen language (es) and a held-out trained one (de), each scored on val
    through the mean of the other parts and through a universal part taught without it."""
    loo = script("zero_shot_loo")
    out = tmp_path / "loo.json"
    assert (
        loo.main(
            [
                "--checkpoint",
                str(base_checkpoint),
                "--held-out",
                "es,de",
                "--teach",
                "es,fr,de",
                "--lines",
                "80",
                "--reference",
                "en",
                "--work",
                str(tmp_path / "work"),
                "--out",
                str(out),
                "--data-root",
                str(shared_data),
                "--max-photos",
                "12",
                "--quiet",
            ]
        )
        == 0
    )
    record = json.loads(out.read_text())
    assert record["complete"] and record["split"] == "val" and record["teach"] == {"es": 80, "fr": 80, "de": 80}
    assert set(record["held_out"]) == {"es", "de"}
    assert record["held_out"]["es"]["taught_from"] == ["fr", "de"]  # never its own lines
    assert record["held_out"]["de"]["held_out"].startswith("its part only")
    trained = record["trained"]
    for lang, row in record["held_out"].items():
        singles = [f"part:{x}" for x in trained if x != lang]  # every other trained part alone, and their outputs' mean
        for part in ("mean", "universal", "ensemble", *singles):
            assert 0 <= row[part]["mr"] <= 100 and 0 < row[part]["n_images"] <= 12  # es: photos with a line
        assert f"part:{lang}" not in row
        towers = [t.name for t in polyvse.load(base_checkpoint).captions.towers if t.reads(lang, unlisted=True)]
        for tower in towers:  # the mean part reading one tower's slice scaled
            assert 0 <= row[f"slice:{tower}x0"]["mr"] <= 100 and 0 <= row[f"slice:{tower}x0.5"]["mr"] <= 100
    # an unseen language's vectors moved by the languages' means (from its training lines, not its val captions)
    assert 0 <= record["held_out"]["es"]["centred"]["mr"] <= 100 and "centred" not in record["held_out"]["de"]
