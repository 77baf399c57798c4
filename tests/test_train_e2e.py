"""End-to-end training on the real data at hand (slices of F8K-ML), resumption included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import polyvse
from polyvse.model.checkpoint import load_training_state, save_training_state
from polyvse_app.cli import main
from polyvse_train.config import TrainConfig
from polyvse_train.train import STATE, train

SMALL = dict(
    name="tiny",
    languages=["en", "de", "zh"],
    embed_dim=64,
    word_dim=32,
    hidden_dim=64,
    batch_size=32,
    smoke_photos=48,
    smoke_epochs=3,
    lr=5e-4,
)


def small_config(tmp_path: Path, **over) -> Path:
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**SMALL, **over}))
    return path


@pytest.fixture(scope="module")
def reference_run(shared_data, tmp_path_factory):
    """One uninterrupted smoke run; other tests compare against it."""
    out = tmp_path_factory.mktemp("ref")
    cfg = TrainConfig(**SMALL)
    metrics = train(cfg, out, shared_data, smoke=True, progress=False)
    return out, metrics


def test_smoke_run_writes_checkpoint_and_metrics(reference_run):
    out, metrics = reference_run
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["languages"] == metrics["languages"]
    assert set(saved["languages"]) == {"en", "de", "zh"}
    for m in saved["languages"].values():
        assert m["n_images"] > 0 and m["n_captions"] >= m["n_images"] - 1
        assert 0 <= m["t2i_r1"] <= m["t2i_r5"] <= m["t2i_r10"] <= 100
    assert (saved["dataset"], saved["seed"]) == ("f8k-ml", 0)
    model = polyvse.load(out / "checkpoint")
    assert model.languages == ["en", "de", "zh"]
    training = json.loads((out / "checkpoint" / "training.json").read_text())
    assert training["metrics"] == metrics["languages"]
    # both records say where they came from, with the saved checkpoint's fingerprint (the index's definition)
    from polyvse.index.fingerprint import model_fingerprint
    from polyvse.provenance import provenance_problems

    prov = saved["provenance"]
    assert provenance_problems(prov) == [] and training["provenance"] == prov
    assert prov["model"]["fingerprint"] == model_fingerprint(model) and prov["model"]["config"] == "tiny"
    assert prov["model"]["checkpoint"] == str(out / "checkpoint") and prov["commit"] == training["commit"]
    assert saved["threads_used"] == training["threads_used"] == [torch.get_num_threads()]


def test_resume_after_stop_reaches_identical_metrics(reference_run, shared_data, tmp_path):
    _, ref = reference_run
    cfg = TrainConfig(**SMALL)
    stopped = train(cfg, tmp_path, shared_data, smoke=True, progress=False, max_steps=5)
    assert stopped == {"stopped_at_step": 5}
    assert (tmp_path / STATE).exists() and not (tmp_path / "metrics.json").exists()
    first = load_training_state(tmp_path / STATE)["spent"]
    assert first["processes"] == 1 and first["cpu_s"] > 0 and first["wall_s"] > 0
    resumed = train(cfg, tmp_path, shared_data, smoke=True, progress=False, resume=True)
    assert resumed["languages"] == ref["languages"]
    # the run's time counts both processes: more than the first spent, and the log's clock never goes back
    assert resumed["processes"] == 2 and resumed["time_complete"]
    assert resumed["cpu_time_s"] > first["cpu_s"] and resumed["wall_time_s"] > first["wall_s"]
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert all(e["seconds"] > first["wall_s"] and e["cpu_seconds"] > first["cpu_s"] for e in log)


def test_a_run_resumes_at_another_thread_count(shared_data, tmp_path):
    """threads sets speed, not what is learned: `make model` stopped at one thread may go on at two."""
    stopped = train(TrainConfig(**SMALL, threads=1), tmp_path, shared_data, smoke=True, progress=False, max_steps=3)
    assert stopped == {"stopped_at_step": 3}
    state = load_training_state(tmp_path / STATE)
    del state["spent"]  # as states saved before the time was kept: the first process's time is unknown
    save_training_state(state, tmp_path / STATE)
    resumed = train(TrainConfig(**SMALL, threads=2), tmp_path, shared_data, smoke=True, progress=False, resume=True)
    assert set(resumed["languages"]) == {"en", "de", "zh"}  # no TrainingStateMismatch
    assert resumed["processes"] == 2 and not resumed["time_complete"]


def test_resume_after_kill_9_reaches_identical_metrics(reference_run, shared_data, tmp_path, capsys):
    """A real `kill -9` in the middle of training, then `polyvse train --resume`; the run's time counts the
    killed process too (what it spent up to its last saved state)."""
    _, ref = reference_run
    config = small_config(tmp_path)
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "polyvse_app.cli",
        "train",
        "--config",
        str(config),
        "--out",
        str(out),
        "--smoke",
        "--quiet",
        "--save-every",
        "1",
        "--data-root",
        str(shared_data),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    state = out / STATE
    deadline = time.time() + 240
    try:
        # wait until a few steps have been saved, then kill without warning
        while time.time() < deadline:
            if state.exists() and torch.load(state, weights_only=False)["step"] >= 4:
                break
            assert proc.poll() is None, "training ended before it could be killed"
            time.sleep(0.2)
        else:
            pytest.fail("training did not save a state in time")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "metrics.json").exists()
    assert (
        main(
            [
                "train",
                "--config",
                str(config),
                "--out",
                str(out),
                "--smoke",
                "--quiet",
                "--resume",
                "--data-root",
                str(shared_data),
            ]
        )
        == 0
    )
    resumed = json.loads((out / "metrics.json").read_text())
    assert resumed["languages"] == ref["languages"]
    assert resumed["processes"] == 2 and resumed["time_complete"]
    assert " s CPU over 2 processes" in capsys.readouterr().out


def test_resume_refuses_a_different_config(reference_run, shared_data, tmp_path):
    cfg = TrainConfig(**SMALL)
    train(cfg, tmp_path, shared_data, smoke=True, progress=False, max_steps=2)
    other = TrainConfig(**{**SMALL, "lr": 1e-3})
    with pytest.raises(polyvse.errors.DataError, match="different config"):
        train(other, tmp_path, shared_data, smoke=True, progress=False, resume=True)


def test_evaluate_command_on_dataset_and_on_user_data(reference_run, shared_data, tmp_path, capsys):
    out, ref = reference_run
    # the same checkpoint evaluated by `polyvse evaluate` on the official test split (all test photos)
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(out / "checkpoint"),
                "--dataset",
                "f8k-ml",
                "--quiet",
                "--data-root",
                str(shared_data),
                "--json",
                str(tmp_path / "eval.json"),
            ]
        )
        == 0
    )
    full = json.loads((tmp_path / "eval.json").read_text())
    assert set(full["languages"]) == {"en", "de", "zh"}
    assert full["languages"]["en"]["n_images"] >= 120  # all official test photos, not the smoke slice
    from polyvse.provenance import provenance_problems

    assert provenance_problems(full["provenance"]) == []
    assert full["provenance"]["model"]["fingerprint"] == ref["provenance"]["model"]["fingerprint"]
    assert full["provenance"]["command"].split()[:1] != [] and full["provenance"]["dirty"] in (True, False)
    assert "| en |" in capsys.readouterr().out
    # user data: a folder of photos + a JSONL captions file, one of them broken
    images = tmp_path / "photos"
    images.mkdir()
    lines = []
    src = sorted((shared_data / "flickr8k" / "images").iterdir())[:6]
    for i, p in enumerate(src):
        (images / p.name).write_bytes(p.read_bytes())
        lines.append(json.dumps({"image": p.name, "lang": "en", "caption": f"a photo number {i}"}))
    (images / "broken.jpg").write_bytes(b"not a jpeg")
    lines.append(json.dumps({"image": "broken.jpg", "lang": "en", "caption": "broken"}))
    caps = tmp_path / "caps.jsonl"
    caps.write_text("\n".join(lines) + "\n")
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(out / "checkpoint"),
                "--images",
                str(images),
                "--captions",
                str(caps),
                "--quiet",
                "--data-root",
                str(tmp_path),
                "--json",
                str(tmp_path / "own.json"),
            ]
        )
        == 0
    )
    own = json.loads((tmp_path / "own.json").read_text())
    assert own["languages"]["en"]["n_images"] == 6
    assert own["n_failed_photos"] == 1


def test_infonce_ranking_loss_trains_and_bad_combinations_name_the_field(reference_run, shared_data, tmp_path):
    """ranking_loss infonce: the same data and model as the hinge run, a different loss (so different numbers);
    options it cannot honour are errors naming the field."""
    from polyvse.errors import DataError

    _, ref = reference_run
    metrics = train(
        TrainConfig(**SMALL, ranking_loss="infonce", temperature=0.1),
        tmp_path / "nce",
        shared_data,
        smoke=True,
        progress=False,
    )
    assert set(metrics["languages"]) == {"en", "de", "zh"} and metrics["languages"] != ref["languages"]
    # HN-NCE's weighting (hard_negative_beta) reaches the loss: the same run with it scores differently
    hard = train(
        TrainConfig(**SMALL, ranking_loss="infonce", temperature=0.1, hard_negative_beta=1.0),
        tmp_path / "hn-nce",
        shared_data,
        smoke=True,
        progress=False,
    )
    assert hard["languages"] != metrics["languages"]
    for over, message in [
        (dict(max_violation=True), "max_violation"),
        (dict(objective="pivot"), "objective vse"),
        (dict(ranking_loss="triplet"), "hinge or infonce"),
        (dict(temperature=0.0), "temperature"),
        (dict(hard_negative_beta=-1.0), "hard_negative_beta"),
        (dict(ranking_loss="hinge", hard_negative_beta=0.5), "hard_negative_beta"),
    ]:
        with pytest.raises(DataError, match=message):
            train(
                TrainConfig(**{**SMALL, "ranking_loss": "infonce", **over}),
                tmp_path / "bad",
                shared_data,
                smoke=True,
                progress=False,
            )


def test_drawn_captions_train_an_epoch_of_one_caption_per_photo_and_language(reference_run, shared_data, tmp_path):
    """objective.vse.draw_captions 1: each epoch trains on one caption of each photo and language, drawn anew, out
    of all the training captions; the Translator, whose stages choose captions by language, refuses it."""
    from polyvse.errors import DataError

    _, ref = reference_run
    metrics = train(TrainConfig(**SMALL, draw_captions=1), tmp_path / "drawn", shared_data, smoke=True, progress=False)
    log = [json.loads(line) for line in (tmp_path / "drawn" / "train_log.jsonl").read_text().splitlines()]
    items = {row["items"] for row in log if "items" in row}
    # a subset of the same size each epoch (but a last lone caption, a batch without negatives, left untrained)
    assert max(items) - min(items) <= 1 and 0 < min(items) and max(items) < metrics["n_train_captions"] / 2
    assert metrics["languages"] != ref["languages"]
    with pytest.raises(DataError, match="draw_captions"):
        train(TrainConfig(**{**SMALL, "draw_captions": -1}), tmp_path / "bad", shared_data, smoke=True, progress=False)
    with pytest.raises(DataError, match="draw_captions"):
        train(
            TrainConfig(**{**SMALL, "objective": "translator", "source_language": "en", "draw_captions": 1}),
            tmp_path / "bad2",
            shared_data,
            smoke=True,
            progress=False,
        )


def test_a_state_saved_before_a_field_was_added_still_resumes():
    """A field added to TrainConfig later (its default keeps the old behaviour) must not turn a saved training
    state stale; any real change of the config, vocabulary or features must."""
    from polyvse_train.train import same_run

    cfg = TrainConfig(**SMALL).to_dict()
    key = {"config": cfg, "smoke": True, "vocab": "v1", "features": "f1"}
    older = {**key, "config": {k: v for k, v in cfg.items() if not k.startswith("teacher_")}}
    assert same_run(older, key)
    assert not same_run({**key, "config": {**cfg, "lr": cfg["lr"] * 2}}, key)
    assert not same_run({**key, "config": {**cfg, "teacher_students": ["cs"]}}, key)
    assert not same_run({**key, "vocab": "v2"}, key)
    assert not same_run({**key, "features": "f2"}, key)


def test_checkpoint_names_the_commit_the_run_started_on(shared_data, tmp_path, monkeypatch):
    """HEAD may move while a long run trains (make model: 70 min): the checkpoint must name the code that ran."""
    import polyvse_train.train as train_mod

    head = {"now": "started-on"}
    monkeypatch.setattr(train_mod, "git_commit", lambda: head["now"])
    finish = train_mod.finish_run

    def commit_lands_while_training(run):
        head["now"] = "committed-later"
        return finish(run)

    monkeypatch.setattr(train_mod, "finish_run", commit_lands_while_training)
    train(TrainConfig(**{**SMALL, "smoke_epochs": 1}), tmp_path, shared_data, smoke=True, progress=False)
    assert json.loads((tmp_path / "checkpoint" / "training.json").read_text())["commit"] == "started-on"
    # f8k-ml's photos keep their aspect ratio: nothing to squash at inference
    assert json.loads((tmp_path / "checkpoint" / "config.json").read_text())["image_features"]["squash"] is False
