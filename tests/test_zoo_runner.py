"""The zoo runner (plan, resume, stale/failed runs), the report generator and the task evaluations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import write_muse_full
from polyvse.errors import DataError
from polyvse_app.cli import main
from polyvse_train.zoo import (
    RunLock,
    ZooRun,
    ZooSpec,
    config_digest,
    effective_config,
    find_configs,
    load_spec,
    plan_runs,
    report as zoo_report,
    results as zoo_results,
    run_dir,
    status,
    tables as zoo_tables,
)
from polyvse_train.zoo.claims import Claim, claim_check
from polyvse_train.zoo.report import write_report
from polyvse_train.zoo.results import RunResult
from polyvse_train.zoo.tables import best_per_language, best_table

REPO = Path(__file__).resolve().parents[1]


def write_config(folder: Path, name: str, **fields) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps({"name": name, **fields}))  # JSON is YAML
    return path


def two_configs(folder: Path) -> Path:
    """vse and vsepp on en + de at one thread: the smallest real zoo."""
    write_config(folder, "vse", objective="vse", languages=["en", "de"], threads=1)
    write_config(folder, "vsepp", objective="vse", languages=["en", "de"], max_violation=True, threads=1)
    return folder


def test_spec_file_in_repo_loads_and_names_existing_configs():
    spec = load_spec(REPO / "configs" / "zoo" / "cpu.yaml")
    names = {n for n, _ in find_configs(REPO / "configs")}
    assert set(spec.curve_configs) <= names and set(spec.configs) <= names
    assert spec.folds == 5 and spec.official


def test_spec_errors_name_the_file_and_field(tmp_path):
    bad = tmp_path / "s.yaml"
    bad.write_text("overrides: {embed_dimm: 3}\n")
    with pytest.raises(DataError, match="embed_dimm") as e:
        load_spec(bad)
    assert "s.yaml" in str(e.value)
    bad.write_text("foldz: 3\n")
    with pytest.raises(DataError, match="foldz"):
        load_spec(bad)
    bad.write_text("by_objective: {mule: {epochs: many}}\n")
    with pytest.raises(DataError, match="epochs"):
        load_spec(bad)


def test_plan_official_then_curve_then_folds_and_effective_config_applies_overrides(tmp_path):
    a = write_config(tmp_path, "a", objective="vse", epochs=30)
    b = write_config(tmp_path, "b", objective="mule", epochs=20, batch_size=128)
    spec = ZooSpec(
        overrides={"epochs": 3, "embed_dim": 16},
        by_objective={"mule": {"batch_size": 32}},
        folds=2,
        curve_configs=["a"],
        curve_lang="cs",
        curve_sizes=[10, 20],
    )
    runs = plan_runs(find_configs(tmp_path), spec)
    assert [r.run_id for r in runs] == [
        "a/official-s0",
        "b/official-s0",
        "a/official-s0-cs10",
        "a/official-s0-cs20",
        "a/fold0of2-s0",
        "b/fold0of2-s0",
        "a/fold1of2-s0",
        "b/fold1of2-s0",
    ]
    cfg_b = effective_config(runs[1], spec)
    assert (cfg_b.schedule.epochs, cfg_b.model.embed_dim, cfg_b.schedule.batch_size, cfg_b.data.split) == (
        3,
        16,
        32,
        "official",
    )
    assert effective_config(runs[0], spec).schedule.batch_size == 128  # by_objective only touches its objective
    assert effective_config(runs[4], spec).data.split == "fold0of2"
    assert runs[3].overrides == {"caption_limit": {"cs": 20}}
    with pytest.raises(DataError, match="unknown config"):
        find_configs(tmp_path, ["zzz"])
    assert a.exists() and b.exists()
    # a plan of some configs (--configs): the curve of a curve config among them, none for the others
    assert [r.run_id for r in plan_runs(find_configs(tmp_path, ["b"]), spec, known=["a", "b"])] == [
        "b/official-s0",
        "b/fold0of2-s0",
        "b/fold1of2-s0",
    ]
    assert len(plan_runs(find_configs(tmp_path, ["a"]), spec, known=["a", "b"])) == 5
    with pytest.raises(DataError, match="learning-curve config 'a'"):
        plan_runs(find_configs(tmp_path, ["b"]), spec, known=["b"])


def test_status_done_stale_failed_and_tasks(tmp_path):
    write_config(tmp_path / "c", "a", objective="vse")
    spec = ZooSpec(overrides={"epochs": 1})
    run = ZooRun("a", tmp_path / "c" / "a.yaml", "official")
    out = tmp_path / "runs"
    assert status(out, run, spec) == "todo"
    d = run_dir(out, run)
    d.mkdir(parents=True)
    assert status(out, run, spec) == "todo"  # nothing trained yet (e.g. it stopped at missing data)
    (d / "state.pt").write_text("training state")
    assert status(out, run, spec) == "partial"
    digest = config_digest(effective_config(run, spec))
    (d / "zoo_run.json").write_text(json.dumps({"config_digest": digest}))
    assert status(out, run, spec) == "tasks"  # the official split also needs its task results
    (d / "tasks.json").write_text("{}")
    assert status(out, run, spec) == "done"
    assert status(out, run, ZooSpec(overrides={"epochs": 2})) == "stale"  # another budget: not these results
    # a run recorded with its full config (as execute does) stays done when TrainConfig gains a field later
    full = effective_config(run, spec).to_dict()
    (d / "zoo_run.json").write_text(json.dumps({"config": {k: v for k, v in full.items() if k != "caption_limit"}}))
    assert status(out, run, spec) == "done"
    (d / "zoo_run.json").write_text(json.dumps({"config": {**full, "margin": 0.3}}))
    assert status(out, run, spec) == "stale"
    (d / "zoo_run.json").write_text(json.dumps({"config_digest": digest}))
    (d / "zoo_run.json").unlink()
    (d / "error.json").write_text(json.dumps({"config_digest": digest}))
    assert status(out, run, spec) == "failed"


def fake_result(config: str, split: str, recalls: dict[str, float], params=1000) -> RunResult:
    langs = {lang: {k: v for k in zoo_results.RECALLS} for lang, v in recalls.items()}
    return RunResult(
        config,
        split,
        0,
        "",
        Path("x"),
        {"languages": langs, "parameters": params},
        {"wall_seconds": 60.0, "cpu_seconds": 100.0, "finished_utc": "2026-01-01T00:00:00Z"},
    )


def test_claim_verdicts_are_paired_over_folds():
    folds = [f"fold{i}of5" for i in range(5)]
    noise = [0.3, -0.2, 0.1, -0.1, 0.2]
    res = [fake_result("good", s, {"en": 30 + 5 + n, "de": 20 + 5}) for s, n in zip(folds, noise)]
    res += [fake_result("base", s, {"en": 30 + i, "de": 20 + i}) for i, s in enumerate(folds)]
    res += [fake_result("same", s, {"en": 30 + i + n, "de": 20 + i - n}) for i, (s, n) in enumerate(zip(folds, noise))]
    holds = claim_check(res, Claim("p", "s", "good", "base"))
    # base drifts 0..4 with the fold, good is flat: good - base = 5 - i + noise/2 on average -> mean 3
    assert holds["n"] == 5 and holds["delta"] == pytest.approx(np.mean([5 - i + n / 2 for i, n in enumerate(noise)]))
    assert holds["verdict"] == "holds"
    assert claim_check(res, Claim("p", "s", "base", "good"))["verdict"] == "does not hold (reversed)"
    assert claim_check(res, Claim("p", "s", "same", "base"))["verdict"] == "not distinguishable from noise"
    assert claim_check(res, Claim("p", "s", "good", "missing"))["verdict"] == "no fold run yet"
    only_en = claim_check(res, Claim("p", "s", "good", "base", ("en",)))
    assert only_en["langs"] == ["en"]
    assert "official_delta" not in holds  # no official-split runs
    # two folds: Student t with 1 degree of freedom (12.7 s.e.), not 2 s.e.: delta 3 with s.e. 0.5 is noise
    two = [
        fake_result("x", "fold0of5", {"en": 33.5}),
        fake_result("x", "fold1of5", {"en": 32.5}),
        fake_result("y", "fold0of5", {"en": 30}),
        fake_result("y", "fold1of5", {"en": 30}),
    ]
    chk = claim_check(two, Claim("p", "s", "x", "y"))
    assert chk["se"] == pytest.approx(0.5) and chk["verdict"] == "not distinguishable from noise"
    res += [fake_result("good", "official", {"en": 40, "de": 30}), fake_result("base", "official", {"en": 38})]
    assert claim_check(res, Claim("p", "s", "good", "base"))["official_delta"] == pytest.approx(2.0)  # en only


def test_best_per_language_merges_configs_with_identical_results():
    folds = ["fold0of5", "fold1of5"]
    res = [fake_result("e5", s, {"en": 40 + i, "de": 30}) for i, s in enumerate(folds)]
    res += [fake_result("best", s, {"en": 40 + i, "de": 30}) for i, s in enumerate(folds)]  # same recipe
    res += [fake_result("gru", s, {"en": 35 + i, "de": 31}) for i, s in enumerate(folds)]
    rows = {lang: (name, mean, second) for lang, name, mean, _, _, second in best_per_language(res)}
    assert rows["en"] == ("best = e5", pytest.approx(40.5), "gru 35.5")
    assert rows["de"] == ("gru", pytest.approx(31.0), "best = e5 30.0")
    assert "| en | `best` = `e5` |" in best_table(res)


def _fake_run_folder(out: Path, config: str, split: str, value: float, tasks: bool) -> None:
    d = out / config / f"{split}-s0"
    d.mkdir(parents=True)
    m = {k: value for k in zoo_results.RECALLS}
    (d / "metrics.json").write_text(json.dumps({"languages": {"en": m, "de": m}, "parameters": 2_000_000}))
    (d / "zoo_run.json").write_text(
        json.dumps(
            {
                "config_name": config,
                "config": {"split": split, "seed": 0},
                "overrides": {},
                "wall_seconds": 90,
                "cpu_seconds": 150,
                "finished_utc": "2026-11-22T08:00:00Z",
            }
        )
    )
    (d / "train_log.jsonl").write_text("".join(json.dumps({"epoch": e, "loss": 10 / e}) + "\n" for e in (1, 2, 3)))
    if tasks:
        pair = {k: value for k in ("a2b_r1", "a2b_r5", "a2b_r10", "b2a_r1", "b2a_r5", "b2a_r10")}
        (d / "tasks.json").write_text(
            json.dumps(
                {
                    "crosslingual": {"f8k-ml-test": {"en-de": {**pair, "n_pairs": 117}}},
                    "sts": {"sts12-msrvid": 50.0, "sts14-images": 60.0, "sts15-images": 70.0},
                    "words": {
                        "de": {
                            "p_at_1": 12.5,
                            "n_words": 80,
                            "n_vocab": 3000,
                            "train_p_at_1": 97.5,
                            "n_train_words": 1200,
                        }
                    },
                }
            )
        )


def test_report_is_generated_from_run_folders(tmp_path):
    out, docs = tmp_path / "runs", tmp_path / "docs"
    for cfg, v in [("vse", 20.0), ("vsepp", 25.0)]:
        _fake_run_folder(out, cfg, "official", v, tasks=True)
        for i in range(3):
            _fake_run_folder(out, cfg, f"fold{i}of5", v + i * 0.5 + (0.3 if cfg == "vsepp" and i == 1 else 0), False)
    planned = [f"{c}/{s}-s0" for s in ["official"] + [f"fold{i}of5" for i in range(5)] for c in ("vse", "vsepp")]
    path = write_report(out, docs, planned, ["vse", "vsepp"], "make zoo", ZooSpec(overrides={"epochs": 10}))
    text = path.read_text()
    assert "| vse | 3 | 2.00 | 2.5 | 20.5 ± 0.5 | 20.5 ± 0.5 |" in text  # 3 folds: 20, 20.5, 21; 150 CPU s
    assert "`epochs: 10`" in text and "8 of 12 planned runs finished" in text
    assert "vsepp/fold4of5-s0" in text  # listed as not run
    assert "| vsepp | 50.0 | 60.0 | 70.0 |" in text  # STS from tasks.json
    assert "**fr**" not in text  # no per-language table for a language no run has
    assert "12.5 (80)" in text and "97.5 (1200)" in text  # word P@1: held-out test part, train part
    row = next(line for line in text.splitlines() if "hardest negative" in line)
    assert "| 3 |" in row and "holds" in row
    assert "| en | `vsepp` | 25.6 ± 0.5 | 3 | vse 20.5 |" in text  # best per language (folds)
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- zoo-best:start -->\nSTALE-TEXT\n<!-- zoo-best:end -->\nrest\n")
    write_report(out, docs, planned, ["vse", "vsepp"], "make zoo", ZooSpec(), readme=readme)
    new = readme.read_text()
    assert new.startswith("intro\n<!-- zoo-best:start -->\nBest configuration") and new.endswith("-->\nrest\n")
    assert "STALE-TEXT" not in new and "| en | `vsepp` |" in new
    for png in ("zoo_recall_by_language.png", "zoo_training_curves.png"):
        assert (docs / png).stat().st_size > 1000
        assert f"({png})" in text
    # a fold that only vse has finished stays out of section 1 and the best-config table (means over the
    # same folds for every row), but enters the paired claim check
    _fake_run_folder(out, "vse", "fold3of5", 40.0, False)
    text = write_report(out, docs, planned, ["vse", "vsepp"], "make zoo", ZooSpec()).read_text()
    assert "| vse | 3 | 2.00 | 2.5 | 20.5 ± 0.5 |" in text and "Folds still running (fold3of5: 1 runs)" in text
    assert "| en | `vsepp` | 25.6 ± 0.5 | 3 | vse 20.5 |" in text


def test_words_section_is_rewritten_in_place(tmp_path):
    out = tmp_path / "runs"
    _fake_run_folder(out, "vse", "official", 20.0, tasks=True)
    doc = tmp_path / "results.md"
    doc.write_text("# R\n\n## 4. STS\n\nkeep 4\n\n## 5. Word translation\n\nOLD 100.0\n\n## 6. Next\n\nkeep 6\n")
    section = zoo_tables.words_section(
        zoo_results.collect(out)[0],
        ["vse"],
        ZooSpec(overrides={"epochs": 6}),
        command="python scripts/word_translation.py --configs vse",
    )
    zoo_report.replace_section(doc, "## 5. ", section)
    text = doc.read_text()
    assert "OLD" not in text and "keep 4" in text and text.endswith("## 6. Next\n\nkeep 6\n")
    assert "| vse | 12.5 (80) |" in text and "| vse | 97.5 (1200) |" in text
    assert "`python scripts/word_translation.py --configs vse`" in text and "`epochs: 6`" in text
    assert "5000–6499" in text  # how the held-out part is made
    with pytest.raises(ValueError, match="## 9. "):
        zoo_report.replace_section(doc, "## 9. ", section)


def test_cli_status_lists_planned_runs(tmp_path, capsys):
    write_config(tmp_path / "c", "a", objective="vse")
    spec = tmp_path / "spec.yaml"
    spec.write_text("folds: 2\noverrides: {epochs: 1}\n")
    assert (
        main(
            [
                "zoo",
                "status",
                "--spec",
                str(spec),
                "--configs-dir",
                str(tmp_path / "c"),
                "--out",
                str(tmp_path / "runs"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "todo     a/official-s0" in out and "todo: 3" in out


# -- task evaluations ---------------------------------------------------------------------------------------


class _Dict2Vec:
    """A text 'model': every caption maps to a fixed random vector keyed by its photo (for the exclusion test)."""

    languages = ["en", "de"]

    def encode_text(self, texts, lang):
        return np.stack([np.random.default_rng(abs(hash(t)) % 2**32).normal(size=8) for t in texts])


def test_crosslingual_excludes_training_photos(shared_data):
    from polyvse.evaluation.crosslingual import crosslingual_pairs_multi30k, evaluate_crosslingual

    pairs = crosslingual_pairs_multi30k(shared_data, "en", "de")
    drop = set(pairs.photo_ids[:10])
    full = evaluate_crosslingual(_Dict2Vec(), shared_data, ["en-de"], corpora=["multi30k-test_2016"])
    less = evaluate_crosslingual(
        _Dict2Vec(), shared_data, ["en-de"], corpora=["multi30k-test_2016"], exclude_photo_ids=drop
    )
    assert full["multi30k-test_2016"]["en-de"]["n_pairs"] == 1000
    assert less["multi30k-test_2016"]["en-de"]["n_pairs"] == 990


def test_word_translation_of_a_model_whose_words_are_aligned(tmp_path):
    from polyvse.evaluation.words import word_translation_by_language
    from polyvse.model.checkpoint import Checkpoint
    from polyvse.model.torch_model import PolyvseModel
    from polyvse.modules import JointEmbeddingModel, ModelConfig
    from polyvse.modules.text_input import CaptionEncoder

    pairs = write_muse_full(tmp_path, "de", "en")[5000:5020]  # 20 words of the test part, found via <root>/muse
    enc = CaptionEncoder.build({"en": [" ".join(t for _, t in pairs)], "de": [" ".join(s for s, _ in pairs)]})
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=len(enc.vocab), image_dim=4, embed_dim=4, word_dim=6, hidden_dim=4)
    )
    with torch.no_grad():  # de word i := en word i (+ noise): perfect translation
        for s, t in pairs:
            model.text_encoder.embed.weight[enc.vocab.token_to_id(f"de:{s}")] = (
                model.text_encoder.embed.weight[enc.vocab.token_to_id(f"en:{t}")] + 1e-4
            )
    pm = PolyvseModel(
        Checkpoint(
            model=model.eval(), captions=enc, backbone="b", feature_key="k", ten_crop=False, languages=["en", "de"]
        )
    )
    assert word_translation_by_language(pm, tmp_path)["de"] == {
        "p_at_1": 100.0,
        "n_words": 20,
        "n_vocab": 20,
        "pivot": "en",
    }
    assert word_translation_by_language(pm, tmp_path, part="train") == {}  # no train-part word in the vocabulary
    with torch.no_grad():  # shuffle the German rows: no longer translations
        w = model.text_encoder.embed.weight
        ids = [enc.vocab.token_to_id(f"de:{s}") for s, _ in pairs]
        w[ids] = w[ids[1:] + ids[:1]].clone()
    assert word_translation_by_language(pm, tmp_path)["de"]["p_at_1"] < 20


@pytest.mark.slow
def test_zoo_end_to_end_on_real_data(shared_data, tmp_path, capsys):
    """Two configs, a 2-fold plan + official split at toy widths, by two worker processes (--jobs 2): train,
    tasks, resume (nothing re-run), report."""
    cdir = two_configs(tmp_path / "configs")
    spec = tmp_path / "spec.yaml"
    spec.write_text("folds: 2\noverrides: {epochs: 1, embed_dim: 16, hidden_dim: 16, word_dim: 16}\n")
    args = [
        "--spec",
        str(spec),
        "--configs-dir",
        str(cdir),
        "--out",
        str(tmp_path / "runs"),
        "--data-root",
        str(shared_data),
    ]
    assert main(["zoo", "run", *args, "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 workers:" in out and "done: 6" in out
    record = json.loads((tmp_path / "runs" / "vse" / "official-s0" / "zoo_run.json").read_text())
    metrics = json.loads((tmp_path / "runs" / "vse" / "official-s0" / "metrics.json").read_text())
    assert (record["cpu_seconds"], record["processes"], record["time_complete"]) == (metrics["cpu_time_s"], 1, True)
    # the run's provenance: the checkout it trained on and the checkpoint it saved, as metrics.json says
    assert record["provenance"] == metrics["provenance"] and len(record["provenance"]["commit"]) == 40
    assert record["provenance"]["model"]["fingerprint"].startswith("sha256:") and len(record["threads_used"]) == 1
    tasks = json.loads((tmp_path / "runs" / "vse" / "official-s0" / "tasks.json").read_text())
    assert set(tasks["crosslingual"]["f8k-ml-test"]) == {"en-de"}
    assert tasks["crosslingual"]["multi30k-test_2016"]["en-de"]["n_pairs"] < 1000  # training photos left out
    assert set(tasks["sts"]) == {"sts12-msrvid", "sts14-images", "sts15-images"}
    assert "de" in tasks["words"]
    assert main(["zoo", "run", *args]) == 0  # resumed: everything is done, nothing runs again
    assert "done: 6" in capsys.readouterr().out
    assert main(["zoo", "report", *args, "--docs", str(tmp_path / "docs"), "--readme", ""]) == 0
    text = (tmp_path / "docs" / "results.md").read_text()
    assert "6 of 6 planned runs finished" in text and "| vsepp | 2 |" in text


def test_partial_run_of_another_config_version_is_moved_aside_and_restarted(tmp_path, monkeypatch):
    """A training state written by older code (another run key) must not fail the run forever."""
    import polyvse_train.train as train_mod
    from polyvse_train.zoo import execute

    write_config(tmp_path / "c", "a", objective="vse")
    spec = ZooSpec(overrides={"epochs": 1})
    run = ZooRun("a", tmp_path / "c" / "a.yaml", "fold0of5")
    out = tmp_path / "runs"
    d = run_dir(out, run)
    d.mkdir(parents=True)
    (d / "state.pt").write_text("old state")
    calls = []

    def fake_train(cfg, folder, root, resume, progress):
        calls.append(Path(folder))
        if (Path(folder) / "state.pt").exists():
            raise train_mod.TrainingStateMismatch("another run key", Path(folder) / "state.pt")
        (Path(folder) / "metrics.json").write_text("{}")
        return {"languages": {}, "wall_time_s": 1.0, "cpu_time_s": 1.0, "processes": 1, "time_complete": True}

    monkeypatch.setattr(train_mod, "train", fake_train)
    assert execute(run, out, tmp_path, spec) == "done"
    assert len(calls) == 2 and status(out, run, spec) == "done"
    assert (d.parent / f"{d.name}.stale-1" / "state.pt").read_text() == "old state"  # kept, not deleted
    assert RunLock(d).acquire()  # the lock is released


def test_run_lock_is_exclusive_and_freed_when_its_process_dies(tmp_path, capsys):
    """A run claimed by a live process is busy for every other; a killed worker frees it at once (no stale pid
    to judge); `zoo status` shows a held run as running, with how far its log got."""
    import subprocess
    import sys

    write_config(tmp_path / "c", "a", objective="vse")
    folder = tmp_path / "runs" / "a" / "official-s0"
    mine = RunLock(folder)
    assert mine.acquire() and mine.held
    assert not RunLock(folder).acquire()
    assert RunLock(folder).taken_elsewhere()
    mine.release()
    assert not RunLock(folder).taken_elsewhere()

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from polyvse_train.zoo import RunLock; "
            f"lock = RunLock({str(folder)!r}); assert lock.acquire(); print('held', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not RunLock(folder).acquire()
        spec = tmp_path / "spec.yaml"
        spec.write_text("folds: 0\n")
        folder.mkdir()
        (folder / "train_log.jsonl").write_text('{"epoch": 1, "seconds": 61.0}\n{"epoch": 2, "seconds": 180.2}\n')
        assert (
            main(
                [
                    "zoo",
                    "status",
                    "--spec",
                    str(spec),
                    "--configs-dir",
                    str(tmp_path / "c"),
                    "--out",
                    str(tmp_path / "runs"),
                ]
            )
            == 0
        )
        assert "running  a/official-s0  (epoch 2 done, 3 min)" in capsys.readouterr().out
    finally:
        holder.kill()
        holder.wait()
    assert RunLock(folder).acquire()  # the kernel dropped the dead process's lock


@pytest.mark.slow
def test_stopping_the_parent_of_jobs_stops_its_workers(shared_data, tmp_path):
    """SIGTERM to `polyvse zoo run --jobs 2` (a session or a scheduler ending it) must not leave workers training
    on: their run locks are free again soon after."""
    import signal
    import subprocess
    import sys
    import time

    cdir = two_configs(tmp_path / "configs")
    spec = tmp_path / "spec.yaml"
    spec.write_text("folds: 0\ntasks: false\noverrides: {epochs: 500, embed_dim: 16, hidden_dim: 16, word_dim: 16}\n")
    out = tmp_path / "runs"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "polyvse_app.cli",
            "zoo",
            "run",
            "--spec",
            str(spec),
            "--configs-dir",
            str(cdir),
            "--out",
            str(out),
            "--data-root",
            str(shared_data),
            "--jobs",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    folders = [out / "vse" / "official-s0", out / "vsepp" / "official-s0"]
    try:
        deadline = time.time() + 120
        while not all(RunLock(f).taken_elsewhere() for f in folders):  # each worker has claimed its run
            assert parent.poll() is None and time.time() < deadline, "the workers did not claim their runs"
            time.sleep(0.2)
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=60) != 0
    finally:
        parent.kill()
    deadline = time.time() + 30
    for f in folders:
        lock = RunLock(f)
        while not lock.acquire():
            assert time.time() < deadline, f"a worker still holds {f}"
            time.sleep(0.5)
        lock.release()


def test_jobs_must_be_positive(tmp_path, capsys):
    write_config(tmp_path / "c", "a", objective="vse")
    assert main(["zoo", "run", "--configs-dir", str(tmp_path / "c"), "--out", str(tmp_path / "r"), "--jobs", "0"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err


def test_missing_data_stops_the_zoo_without_marking_runs_failed(tmp_path, capsys):
    """A wrong data root fails every run alike: the zoo must stop at the first with the fetch hint, leaving no
    error.json (else every run would need --retry-failed once the data is there)."""
    cdir = two_configs(tmp_path / "configs")
    spec = tmp_path / "spec.yaml"
    spec.write_text("folds: 2\noverrides: {epochs: 1}\n")
    out = tmp_path / "runs"
    rc = main(
        [
            "zoo",
            "run",
            "--spec",
            str(spec),
            "--configs-dir",
            str(cdir),
            "--out",
            str(out),
            "--data-root",
            str(tmp_path / "empty"),
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "not found" in err and "polyvse data fetch" in err
    assert not list(out.rglob("error.json"))
    assert not list(out.rglob("zoo_run.json"))
