"""`polyvse model build` on small data: a packaged config (usem-frozen) made tiny by --set and trained --smoke (en,
de; per-language parts), five photos indexed, a one-language plan (es by Procrustes on 200 MultiScript30k lines).
A build stopped in its adaptation stage resumes without training or indexing again, ends with one checkpoint that
the index accepts and a complete build record; a finished build is left as it is; a finished model of another
config is moved aside; a bad plan or an unknown config is refused before any training."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import polyvse
from polyvse.errors import DataError
from polyvse_app import cli
from polyvse_app.commands import model as model_command

PLAN = "pivot: en\nlanguages:\n  - {lang: es, method: procrustes, lines: 200}\n"


def build_args(folder: Path, shared_data: Path, *extra: str) -> list[str]:
    return [
        "model",
        "build",
        "--out",
        str(folder / "model"),
        "--config",
        "usem-frozen",
        "--set",
        "languages=[en, de]",
        "--set",
        "embed_dim=16",
        "--set",
        "universal_dim=32",
        "--set",
        "smoke.photos=8",
        "--set",
        "smoke.max_batches=2",
        "--threads",
        "1",
        "--smoke",
        "--plan",
        str(folder / "plan.yaml"),
        "--images",
        str(folder / "photos"),
        "--data-root",
        str(shared_data),
        "--quiet",
        *extra,
    ]


@pytest.fixture()
def one_thread():
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)  # the build sets --threads for this process


@pytest.fixture(scope="module")
def stopped(shared_data, tmp_path_factory) -> Path:
    """A build stopped in its adaptation stage: trained and indexed, nothing adapted."""
    import torch

    folder = tmp_path_factory.mktemp("model-build")
    (folder / "photos").mkdir()
    for photo in sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:5]:
        (folder / "photos" / photo.name).symlink_to(photo)
    (folder / "plan.yaml").write_text(PLAN, encoding="utf-8")

    def stop(self, header):
        raise KeyboardInterrupt  # the build stopped as the adaptation began

    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(model_command.Build, "adapt", stop)
        with pytest.raises(KeyboardInterrupt):
            cli.main(build_args(folder, shared_data))
    torch.set_num_threads(threads)
    return folder


@pytest.mark.slow
def test_a_stopped_build_resumes_and_a_finished_one_is_left_as_it_is(stopped, shared_data, one_thread, monkeypatch):
    from polyvse.index import PhotoIndex, Searcher, check_index_accepts
    from polyvse.provenance import checkpoint_fingerprint

    folder = stopped  # resumed where it stopped: the same photo folder
    out = folder / "model"
    before = json.loads((out / "build.json").read_text())
    assert set(before["stages"]) == {"train", "index"} and not before["complete"]
    assert before["stages"]["index"]["photos"] == 5 and not (out / "adapted.json").exists()

    # the command line, end to end: the stages done before are skipped, the adaptation runs
    done = subprocess.run(
        [sys.executable, "-m", "polyvse_app", *build_args(folder, shared_data)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    log = done.stdout
    assert "[1/3] train: done before" in log and "[2/3] index: done before" in log, log
    assert re.search(r"^\[3/3\] adapt: done, \d+\.\d s$", log, re.M), log
    record = json.loads((out / "build.json").read_text())
    stages = record["stages"]
    assert record["complete"] and list(stages) == ["train", "index", "adapt"]
    assert stages["train"]["done_before"] and stages["train"]["seconds"] == before["stages"]["train"]["seconds"] > 0
    assert not stages["adapt"]["done_before"] and stages["adapt"]["seconds"] > 0
    assert stages["adapt"]["languages"]["es"]["method"] == "procrustes"
    assert record["precision"] == stages["train"]["precision"]
    assert stages["train"]["precision"] == {"asked": "fp32", "used": "fp32"}  # the product's, on any machine
    assert isinstance(record["machine"]["native_bf16"], bool) and record["machine"]["cores"] >= 1
    assert record["threads"] == {"train": 1, "index_and_adapt": 1}
    fp = record["fingerprints"]
    assert fp["model"] == checkpoint_fingerprint(out / "checkpoint") == record["provenance"]["model"]["fingerprint"]
    assert fp["trained"] == checkpoint_fingerprint(out / "trained-checkpoint")
    assert fp["index"] == json.loads((out / "index" / "manifest.json").read_text())["model"]["fingerprint"]

    # one checkpoint that serves es through its adapted part, which the index built before accepts
    model = polyvse.load(out / "checkpoint")
    assert set(model.adapted_languages) == {"es"} and model.languages == ["en", "de", "es"]
    check_index_accepts(out / "index", model)
    assert len(Searcher(model, PhotoIndex.open(out / "index")).text("un perro corre", "es", k=3).hits) == 3

    # a finished build: every stage done before, nothing rewritten
    mtime = (out / "checkpoint" / "config.json").stat().st_mtime_ns
    monkeypatch.setattr("polyvse_train.train.train", lambda *a, **k: pytest.fail("trained again"))
    monkeypatch.setattr("polyvse.index.build_index", lambda *a, **k: pytest.fail("indexed again"))
    assert cli.main(build_args(folder, shared_data)) == 0
    again = json.loads((out / "build.json").read_text())
    assert all(s["done_before"] for s in again["stages"].values()) and again["complete"]
    assert again["stages"]["adapt"]["seconds"] == stages["adapt"]["seconds"]
    assert (out / "checkpoint" / "config.json").stat().st_mtime_ns == mtime


@pytest.mark.slow
def test_the_index_stage_reindexes_other_photos(stopped, shared_data, tmp_path, one_thread, capsys):
    """Another photo folder (here a copy with one photo fewer) is another index; the training is kept."""
    folder = tmp_path / "b"
    shutil.copytree(stopped, folder, symlinks=True)
    (folder / "photos" / sorted((folder / "photos").iterdir())[0].name).unlink()
    assert cli.main(build_args(folder, shared_data, "--skip-adapt")) == 0
    log = capsys.readouterr().out
    assert "[1/2] train: done before" in log and re.search(r"^\[2/2\] index: done, [\d.]+ s$", log, re.M), log
    record = json.loads((folder / "model" / "build.json").read_text())
    assert record["stages"]["index"]["photos"] == record["stages"]["index"]["indexed"] == 4
    assert record["plan"] is None and record["complete"]


def _args(tmp_path: Path, *extra: str):
    (tmp_path / "photos").mkdir(exist_ok=True)
    return cli.build_parser().parse_args(
        [
            "model",
            "build",
            "--out",
            str(tmp_path / "model"),
            "--config",
            "usem-frozen",
            "--images",
            str(tmp_path / "photos"),
            *extra,
        ]
    )


def test_a_finished_model_of_another_config_is_moved_aside(tmp_path, monkeypatch):
    from polyvse_train.config import TrainConfig

    out = tmp_path / "model"
    out.mkdir()
    other = TrainConfig.load("usem-frozen").with_overrides({"embed_dim": 8}, "test")
    (out / "metrics.json").write_text(json.dumps({"config": other.to_dict(), "smoke": False}))
    trained = []
    monkeypatch.setattr("polyvse_train.train.train", lambda cfg, o, *a, **k: trained.append(o) or {"precision": "fp32"})
    build = model_command.Build(_args(tmp_path, "--skip-adapt"))
    assert build.train("[1/2] train") == (False, build._train_info({"precision": "fp32"}))
    assert trained == [out] and [p.name for p in tmp_path.glob("model.stale-*")] != []
    assert (next(tmp_path.glob("model.stale-*")) / "metrics.json").is_file()  # kept, not mixed into the new run


def test_what_counts_as_the_same_training():
    from polyvse_train.config import TrainConfig

    cfg = TrainConfig.load("usem-frozen")
    metrics = {"config": cfg.to_dict(), "smoke": False}
    assert model_command.same_training(metrics, cfg, smoke=False)
    assert model_command.same_training(metrics, cfg.with_overrides({"threads": 2}, "t"), smoke=False)  # speed only
    assert not model_command.same_training(metrics, cfg.with_overrides({"epochs": 2}, "t"), smoke=False)
    assert not model_command.same_training(metrics, cfg, smoke=True)


def test_a_bad_plan_or_an_unknown_config_is_refused_before_any_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("polyvse_train.train.train", lambda *a, **k: pytest.fail("trained"))
    bad = tmp_path / "plan.yaml"
    bad.write_text("languages:\n  - {lang: es, method: magic}\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"plan\.yaml: languages\[1\]: method 'magic'"):
        model_command.Build(_args(tmp_path, "--plan", str(bad)))
    with pytest.raises(DataError, match=r"no packaged adaptation plan named 'prodcut'; did you mean adapt/product"):
        model_command.Build(_args(tmp_path, "--plan", "prodcut"))
    assert (
        cli.main(
            [
                "model",
                "build",
                "--out",
                str(tmp_path / "m"),
                "--config",
                "polyvse-bst",
                "--images",
                str(tmp_path / "photos"),
            ]
        )
        == 2
    )
    assert "did you mean polyvse-best, f8k-full/polyvse-best?" in capsys.readouterr().err
    with pytest.raises(DataError, match="no photo folder to index"):
        model_command.Build(_args(tmp_path, "--images", str(tmp_path / "none")))


def test_the_default_build_is_the_product_recipe_and_plan():
    from polyvse_train.config import TrainConfig
    from polyvse_train.config.packaged import PLAN, resolve_config

    args = cli.build_parser().parse_args(["model", "build"])
    assert (args.out, args.config, args.plan, args.precision) == (
        "runs/model",
        "f8k-full/polyvse-best",
        "product",
        "fp32",
    )
    assert TrainConfig.load(args.config).name == "f8k-full-polyvse-best"
    assert resolve_config(args.plan, kind=PLAN).as_posix().endswith("polyvse_train/configs/adapt/product.yaml")
