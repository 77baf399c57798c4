"""The zoo on another dataset (configs/zoo/f8k-full.yaml): official split only, configs at their own settings,
extra seeds, and its report block in docs/results.md beside the F8K-ML sections (fake runs, no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polyvse_app.cli import main
from polyvse_train.config import TrainConfig
from polyvse_train.zoo import ZooRun, ZooSpec, effective_config, find_configs, load_spec, plan_runs, status
from polyvse_train.zoo.block import f8kml_claims_from_doc, write_block, write_block_report
from polyvse_train.zoo.claims import Claim, claim_check_seeds, seed_noise
from polyvse_train.zoo.results import RECALLS, RunResult

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "configs" / "zoo" / "f8k-full.yaml"


def test_f8k_full_spec_covers_every_config_once_on_the_official_split():
    spec = load_spec(SPEC)
    assert spec.folds == 0 and spec.official and spec.title == "f8k-full" and spec.out == "runs/zoo-f8k-full"
    configs = find_configs(REPO / "configs", spec.configs or None, spec.own_settings)
    names = [n for n, _ in configs]
    assert sorted(names) == sorted({p.stem for p in (REPO / "configs").glob("*.yaml")})  # a new config is listed
    runs = plan_runs(configs, spec)
    assert {r.split for r in runs} == {"official"} and len({r.run_id for r in runs}) == len(runs)
    assert [r.config for r in runs[: len(names)]] == names and {r.seed for r in runs[: len(names)]} == {0}
    three = {n for n in names if {r.seed for r in runs if r.config == n} == {0, 1, 2}}
    assert {"e5-frozen", "polyvse-best"} <= three and len(three) == len(spec.extra_seeds)
    for run in runs:
        cfg = effective_config(run, spec).to_dict()
        # the budget's first caption per photo and language, but where a config's own settings say otherwise
        # (polyvse-best: every caption, one drawn anew each epoch)
        captions = (
            TrainConfig.load(REPO / spec.own_settings[run.config]).data.captions_per_photo
            if run.config in spec.own_settings
            else 1
        )
        assert (cfg["dataset"], cfg["captions_per_photo"], cfg["eval_split"]) == ("f8k-full", captions, "test")
        assert cfg["threads"] == 1
        if run.config not in spec.own_settings:
            assert cfg["backbone"] == "efficientnet-lite0" and cfg["epochs"] == 15
    # the configs at their own settings are exactly their files (the baseline and polyvse's best model)
    for name, file in spec.own_settings.items():
        own = TrainConfig.load(REPO / file).to_dict()
        eff = effective_config(ZooRun(name, REPO / file, "official", 0), spec).to_dict()
        assert {k: v for k, v in eff.items() if own[k] != v} == {}


def test_own_settings_skip_the_budget_and_extra_seeds_come_after_the_seed0_pass(tmp_path):
    cdir = tmp_path / "configs"
    cdir.mkdir()
    (cdir / "a.yaml").write_text(json.dumps({"name": "a", "objective": "vse", "epochs": 30}))
    (cdir / "b.yaml").write_text(json.dumps({"name": "b", "objective": "vse", "epochs": 30}))
    ref = tmp_path / "b-ref.yaml"
    ref.write_text(json.dumps({"name": "b-ref", "objective": "vse", "epochs": 15, "embed_dim": 1024}))
    spec = ZooSpec(
        overrides={"epochs": 3, "embed_dim": 64},
        folds=0,
        own_settings={"b": str(ref)},
        extra_seeds={"a": [1, 2], "b": [2]},
        tasks=False,
    )
    configs = find_configs(cdir, None, spec.own_settings)
    assert dict(configs)["b"] == ref  # replaces the folder's b
    runs = plan_runs(configs, spec)
    assert [r.run_id for r in runs] == [
        "a/official-s0",
        "b/official-s0",
        "a/official-s1",
        "a/official-s2",
        "b/official-s2",
    ]
    a, b = (effective_config(r, spec).to_dict() for r in runs[:2])
    assert (a["epochs"], a["embed_dim"]) == (3, 64)
    assert (b["epochs"], b["embed_dim"]) == (15, 1024)
    with pytest.raises(Exception, match="extra_seeds"):
        plan_runs(configs, ZooSpec(folds=0, extra_seeds={"zzz": [1]}))
    only_b = plan_runs(configs[1:], spec, known=["a", "b"])  # --configs b: a's extra seeds are not planned
    assert [r.run_id for r in only_b] == ["b/official-s0", "b/official-s2"]
    # without tasks, a trained official run is done with no tasks.json
    d = tmp_path / "runs" / "a" / "official-s0"
    d.mkdir(parents=True)
    (d / "zoo_run.json").write_text(json.dumps({"config": effective_config(runs[0], spec).to_dict()}))
    assert status(tmp_path / "runs", runs[0], spec) == "done"
    assert status(tmp_path / "runs", runs[0], ZooSpec(**{**spec.__dict__, "tasks": True})) == "tasks"


def fake(config: str, seed: int, value: float, langs=("en", "de")) -> RunResult:
    return RunResult(
        config,
        "official",
        seed,
        "",
        Path("x"),
        {"languages": {lang: {k: value for k in RECALLS} for lang in langs}, "parameters": 10},
        {"wall_seconds": 60.0, "cpu_seconds": 120.0, "finished_utc": "2026-11-24T00:00:00Z"},
    )


def test_claims_by_seed_paired_or_against_the_seed_noise():
    res = [fake("good", s, 30 + s + 0.1 * (s == 1)) for s in range(3)] + [fake("base", s, 25 + s) for s in range(3)]
    res += [fake("one", 0, 40.0), fake("other", 0, 39.5)]
    noise = seed_noise(res)
    assert noise[1] == 4 and noise[0] == pytest.approx(1.0, abs=0.05)  # seeds move both 3-seed configs by 1
    chk = claim_check_seeds(res, Claim("p", "s", "good", "base"), noise)
    assert chk["n"] == 3 and chk["delta"] == pytest.approx(5.0333, abs=1e-3) and chk["verdict"] == "holds"
    single = claim_check_seeds(res, Claim("p", "s", "one", "other"), noise)
    assert single["n"] == 1 and single["verdict"] == "not distinguishable from noise"  # 0.5 < 2.78 * √2 * 1
    assert claim_check_seeds(res, Claim("p", "s", "one", "base"), noise)["verdict"] == "holds"  # 40 - 25
    assert claim_check_seeds(res, Claim("p", "s", "one", "base"), None)["verdict"].startswith("one seed")
    assert claim_check_seeds(res, Claim("p", "s", "x", "base"), noise)["verdict"] == "not run yet"


F8KML_DOC = """# Method zoo: results on F8K-ML

## 1. Image–sentence retrieval

| config | runs |
|---|---:|
| vse | 5 |

## 8. Which of the papers' conclusions hold on this data

| paper | claim | comparison | folds | Δ mean recall (± s.e.) | Δ per language | Δ official split | verdict on F8K-ML |
|---|---:|---:|---:|---:|---:|---:|---:|
| Faghri et al. (VSE++) | the hardest negative beats the sum over negatives | vsepp vs vse | 5 | -8.19 ± 0.32 | en -9.2 | -9.1 | does not hold (reversed) |
"""


def _fake_run(out: Path, config: str, seed: int, value: float) -> None:
    d = out / config / f"official-s{seed}"
    d.mkdir(parents=True)
    m = {**{k: value for k in RECALLS}, "i2t_medr": 100 - value, "t2i_medr": 110 - value}
    (d / "metrics.json").write_text(json.dumps({"languages": {"en": m, "de": m}, "parameters": 2_000_000}))
    (d / "zoo_run.json").write_text(
        json.dumps(
            {
                "config_name": config,
                "config": {"split": "official", "seed": seed},
                "overrides": {},
                "wall_seconds": 90,
                "cpu_seconds": 150,
                "finished_utc": "2026-11-24T08:00:00Z",
            }
        )
    )


def test_block_report_is_partial_and_leaves_the_f8kml_sections_untouched(tmp_path):
    doc = tmp_path / "results.md"
    doc.write_text(F8KML_DOC)
    out = tmp_path / "runs"
    for seed, v in enumerate((20.0, 21.0, 22.0)):
        _fake_run(out, "vse", seed, v)
    _fake_run(out, "vsepp", 0, 30.0)
    planned = ["vse/official-s0", "vsepp/official-s0", "vse/official-s1", "vse/official-s2", "vsepp/official-s1"]
    spec = ZooSpec(overrides={"dataset": "f8k-full"}, folds=0, title="f8k-full", extra_seeds={"vse": [1, 2]})
    write_block_report(out, doc, planned, ["vse", "vsepp"], "make zoo-f8k-full", spec, compare_out=tmp_path / "no")
    text = doc.read_text()
    assert text.startswith(F8KML_DOC)  # the F8K-ML document is kept byte for byte
    block = text[len(F8KML_DOC) :]
    assert block.startswith("\n<!-- zoo-f8k-full:start -->\n") and block.endswith("<!-- zoo-f8k-full:end -->\n")
    assert "**Partial report: the zoo is still running.** 4 of 5 planned runs finished." in block
    assert "Missing: `vsepp/official-s1`." in block
    assert "| vse | 3 | 2.00 | 2.5 | 21.0 ± 1.0 | 21.0 ± 1.0 |" in block  # mean ± std over seeds
    # per language the Flickr8K protocol's columns: R@1/5/10 and the median rank, both ways
    assert (
        "| config | runs | i2t R@1 | i2t R@5 | i2t R@10 | i2t medR | t2i R@1 | t2i R@5 | t2i R@10 | t2i medR |" in block
    )
    assert (
        "| vse | 3 | 21.0 ± 1.0 | 21.0 ± 1.0 | 21.0 ± 1.0 | 79.0 ± 1.0 | 21.0 ± 1.0 | 21.0 ± 1.0 | 21.0 ± 1.0 | "
        "89.0 ± 1.0 |" in block
    )
    row = next(line for line in block.splitlines() if "| vsepp vs vse |" in line)
    # 850: read from the F8K-ML table above; 8k: one seed each, +10 against t(2 df)·√2·σ = 4.303·1.414·1.0
    assert "| -8.19 ± 0.32 | does not hold (reversed) | 1 | 10.00 (noise ±6.09) |" in row and row.endswith("| holds |")
    assert (
        "\n0 of the 1 claims with a verdict at both scales keep it at 8k photos; 1 change: vsepp vs vse "
        "(does not hold (reversed) → holds).\n" in block
    )  # claims without a run at 8k do not count
    # written again: the block is replaced in place, nothing else changes
    _fake_run(out, "vsepp", 1, 30.0)
    write_block_report(out, doc, planned, ["vse", "vsepp"], "make zoo-f8k-full", spec, compare_out=None)
    again = doc.read_text()
    assert again.startswith(F8KML_DOC) and again.count("zoo-f8k-full:start") == 1
    assert "5 of 5 planned runs finished." in again and "Partial report" not in again
    assert "0.2 CPU-hours so far" in text  # 4 runs of 150 s, 1 missing
    assert "CPU-hours so far" not in again


def test_cpu_time_of_runs_resumed_before_it_was_kept_is_marked_a_lower_bound(tmp_path):
    """Runs recorded before the time of a resumed run's earlier processes was kept count only the last process:
    their training log gives them away (its clock went back, or its loops outlast the recorded wall time), and
    the report marks their CPU time with ≥ instead of passing it off as the whole run's."""

    def result(run: dict, log: list[dict]) -> RunResult:
        return RunResult(
            "vse", "official", 0, "", tmp_path, {}, {"wall_seconds": 100.0, "cpu_seconds": 90.0, **run}, log=log
        )

    one = [{"epoch": 1, "seconds": 40.0, "loop_seconds": 35.0}, {"epoch": 2, "seconds": 95.0, "loop_seconds": 50.0}]
    assert result({}, one).time_complete
    assert not result({}, [one[0], {"epoch": 2, "seconds": 30.0, "loop_seconds": 25.0}]).time_complete  # went back
    assert not result({}, [{"epoch": 1, "seconds": 40.0, "loop_seconds": 300.0}]).time_complete  # loops > wall
    assert result({"time_complete": True}, [{"epoch": 1, "seconds": 40.0, "loop_seconds": 300.0}]).time_complete
    assert not result({"time_complete": False}, one).time_complete

    doc = tmp_path / "results.md"
    doc.write_text(F8KML_DOC)
    out = tmp_path / "runs"
    _fake_run(out, "vse", 0, 20.0)
    _fake_run(out, "vsepp", 0, 30.0)
    (out / "vsepp" / "official-s0" / "train_log.jsonl").write_text(
        '{"epoch": 1, "seconds": 80.0, "loop_seconds": 70.0}\n{"epoch": 2, "seconds": 20.0, "loop_seconds": 15.0}\n'
    )
    spec = ZooSpec(overrides={"dataset": "f8k-full"}, folds=0, title="f8k-full")
    write_block_report(
        out,
        doc,
        ["vse/official-s0", "vsepp/official-s0"],
        ["vse", "vsepp"],
        "make zoo-f8k-full",
        spec,
        compare_out=None,
    )
    block = doc.read_text()[len(F8KML_DOC) :]
    assert "| vse | 1 | 2.00 | 2.5 |" in block and "| vsepp | 1 | 2.00 | ≥ 2.5 |" in block
    assert "at least 0.1 CPU-hours (runs resumed before the time of a run's earlier processes was kept: 1;" in block


def test_write_block_between_markers_and_f8kml_claims_parse(tmp_path):
    doc = tmp_path / "r.md"
    doc.write_text("head\n<!-- zoo-x:start -->\nOLD\n<!-- zoo-x:end -->\ntail\n")
    write_block(doc, "x", "NEW\n")
    assert doc.read_text() == "head\n<!-- zoo-x:start -->\nNEW\n<!-- zoo-x:end -->\ntail\n"
    doc.write_text(F8KML_DOC)
    assert f8kml_claims_from_doc(doc) == {"vsepp vs vse": ("-8.19 ± 0.32", "does not hold (reversed)")}
    assert f8kml_claims_from_doc(tmp_path / "missing.md") == {}


def test_cli_status_of_the_f8k_full_spec_plans_official_runs_only(tmp_path, capsys):
    assert main(["zoo", "status", "--spec", str(SPEC), "--out", str(tmp_path / "runs")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all("/official-s" in line for line in lines[:-1]) and lines[-1].startswith("todo: ")


def test_cli_report_of_a_titled_spec_writes_its_block_only(tmp_path, capsys):
    cdir = tmp_path / "configs"
    cdir.mkdir()
    (cdir / "vse.yaml").write_text(json.dumps({"name": "vse", "objective": "vse"}))
    spec = tmp_path / "spec.yaml"
    spec.write_text("title: f8k-full\nfolds: 0\nout: " + str(tmp_path / "runs") + "\n")
    _fake_run(tmp_path / "runs", "vse", 0, 20.0)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "results.md").write_text(F8KML_DOC)
    assert (
        main(
            [
                "zoo",
                "report",
                "--spec",
                str(spec),
                "--configs-dir",
                str(cdir),
                "--docs",
                str(docs),
                "--compare-out",
                str(tmp_path / "none"),
            ]
        )
        == 0
    )
    text = (docs / "results.md").read_text()
    assert text.startswith(F8KML_DOC) and "1 of 1 planned runs finished." in text
    assert f"`polyvse zoo run --spec {spec}`" in text and not (docs / "zoo_recall_by_language.png").exists()


def test_estimate_times_each_stage_of_a_run(shared_data, tmp_path):
    """`polyvse zoo estimate`: a few timed steps per stage (the Translator has two) extrapolate to the run."""
    from polyvse_train.zoo.estimate import estimate_run

    cdir = tmp_path / "configs"
    cdir.mkdir()
    (cdir / "t.yaml").write_text(
        json.dumps(
            {
                "name": "t",
                "objective": "translator",
                "languages": ["de", "fr"],
                "source_language": "de",
                "source_epochs": 2,
                "language_map": ["fr"],
                "text_sharing": "shared",
                "threads": 1,
                "batch_size": 64,
            }
        )
    )
    spec = ZooSpec(overrides={"epochs": 3, "embed_dim": 16, "hidden_dim": 16, "word_dim": 16}, folds=0)
    est = estimate_run(ZooRun("t", cdir / "t.yaml", "official"), spec, shared_data, steps=2)
    assert [s.epochs for s in est.stages] == [2, 3]  # source stage, then the target stage
    for s in est.stages:
        assert s.batches_per_epoch > 2 and s.step_s > 0 and s.first_step_s > 0
        assert s.seconds() == pytest.approx(s.first_step_s + s.step_s * (s.epochs * s.batches_per_epoch - 1))
    assert est.seconds() == pytest.approx(est.setup_s + est.eval_s + sum(s.seconds() for s in est.stages))
    assert est.to_dict()["minutes"] == round(est.seconds() / 60, 1)
    assert not list(tmp_path.glob("runs*"))  # nothing written beside the configs


def test_the_f8kml_report_keeps_the_blocks_of_other_zoos(tmp_path):
    from polyvse_train.zoo.report import write_report

    out, docs = tmp_path / "runs", tmp_path / "docs"
    _fake_run(out, "vse", 0, 20.0)
    plain = write_report(out, tmp_path / "plain", ["vse/official-s0"], ["vse"], "make zoo", ZooSpec()).read_text()
    docs.mkdir()
    block = "<!-- zoo-f8k-full:start -->\nBLOCK\n<!-- zoo-f8k-full:end -->"
    (docs / "results.md").write_text("OLD F8K-ML TEXT\n\n" + block + "\n")
    text = write_report(out, docs, ["vse/official-s0"], ["vse"], "make zoo", ZooSpec()).read_text()
    assert text == plain.rstrip("\n") + "\n\n" + block + "\n" and "OLD" not in text


def test_a_difference_at_the_noise_bound_prints_with_enough_digits():
    """A one-seed verdict of 'holds' beside '0.85 (noise ±0.85)' reads as a contradiction: print the digits that
    tell the two apart."""
    from polyvse_train.zoo.block import _distinguishing_digits

    assert _distinguishing_digits(0.853, 0.848) == 3
    assert _distinguishing_digits(-0.8531, 0.8529) == 4
    assert _distinguishing_digits(2.5, 0.85) == 2


def _two_config_zoo(tmp_path: Path, more_spec: str = ""):
    """(configs dir, runs folder, spec file, spec, planned runs) of a zoo of vse and vsepp."""
    cdir = tmp_path / "configs"
    cdir.mkdir()
    for name in ("vse", "vsepp"):
        (cdir / f"{name}.yaml").write_text(json.dumps({"name": name, "objective": "vse"}))
    out = tmp_path / "runs" / "zoo-x"
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(f"title: f8k-full\nfolds: 0\ntasks: false\nout: {out}\n" + more_spec)
    spec = load_spec(spec_file)
    return cdir, out, spec_file, spec, plan_runs(find_configs(cdir, None, spec.own_settings), spec, ["vse", "vsepp"])


def _finished_run(out: Path, run, spec, value: float) -> None:
    """A fake finished run whose record is of this very config (status "done")."""
    _fake_run(out, run.config, run.seed, value)
    rec = json.loads((out / run.run_id / "zoo_run.json").read_text())
    rec["config"] = effective_config(run, spec).to_dict()
    (out / run.run_id / "zoo_run.json").write_text(json.dumps(rec))


def test_records_are_the_report_files_and_reproduce_the_block(tmp_path, capsys):
    """`polyvse zoo records`: the small files the report reads, copied to a committable folder; the report from
    them equals the report from the run folders; a run being trained again loses its old records."""
    cdir, out, spec_file, spec, runs = _two_config_zoo(tmp_path)
    for run, value in zip(runs, (20.0, 30.0)):
        _finished_run(out, run, spec, value)
        d = out / run.run_id
        (d / "train_log.jsonl").write_text('{"epoch": 1, "seconds": 9.0}\n')
        (d / "state.pt").write_bytes(b"big")
        (d / "checkpoint").mkdir()
    assert [status(out, r, spec) for r in runs] == ["done", "done"]
    to = tmp_path / "results" / "zoo-x"
    args = ["--spec", str(spec_file), "--configs-dir", str(cdir)]
    assert main(["zoo", "records", *args, "--to", str(to)]) == 0
    assert "copied 2" in capsys.readouterr().out
    assert sorted(p.name for p in (to / "vse" / "official-s0").iterdir()) == [
        "metrics.json",
        "train_log.jsonl",
        "zoo_run.json",
    ]
    docs = {}
    for source in (out, to):
        docs[source] = tmp_path / f"docs-{source.parent.name}"
        docs[source].mkdir()
        (docs[source] / "results.md").write_text(F8KML_DOC)
        assert (
            main(
                [
                    "zoo",
                    "report",
                    *args,
                    "--out",
                    str(source),
                    "--docs",
                    str(docs[source]),
                    "--compare-out",
                    str(tmp_path / "none"),
                ]
            )
            == 0
        )
    assert (docs[out] / "results.md").read_text() == (docs[to] / "results.md").read_text()
    assert "2 of 2 planned runs finished." in (docs[to] / "results.md").read_text()
    # vsepp is trained again (its folder moved aside, a new one started): its records go; vse's stay
    (out / "vsepp" / "official-s0").rename(out / "vsepp" / "official-s0.stale-1")
    (out / "vsepp" / "official-s0").mkdir()
    (out / "vsepp" / "official-s0" / "train_log.jsonl").write_text('{"epoch": 1, "seconds": 9.0}\n')
    assert main(["zoo", "records", *args, "--to", str(to)]) == 0
    assert "copied 1, removed 1" in capsys.readouterr().out
    assert not (to / "vsepp").joinpath("official-s0").exists() and (to / "vse" / "official-s0").is_dir()
    # another machine without the run folders keeps the records it was given
    assert main(["zoo", "records", *args, "--out", str(tmp_path / "empty"), "--to", str(to)]) == 0
    assert "kept 1, absent 1" in capsys.readouterr().out
    assert main(["zoo", "records", *args, "--to", str(out)]) != 0
    assert "is the runs folder itself" in capsys.readouterr().err


def test_records_of_whole_configs_only(tmp_path, capsys):
    """`zoo records --whole-configs`: a config with a seed still training (or not started) keeps its old records
    for every seed, so no committed row mixes retrained and older seeds."""
    cdir, out, spec_file, spec, runs = _two_config_zoo(tmp_path, "extra_seeds:\n  vsepp: [1]\n")
    assert [r.run_id for r in runs] == ["vse/official-s0", "vsepp/official-s0", "vsepp/official-s1"]
    for run in runs[:2]:  # vsepp's seed 1 not trained yet
        _finished_run(out, run, spec, 20.0)
    to = tmp_path / "results" / "zoo-x"
    _fake_run(to, "vsepp", 0, 30.0)  # the older records, both seeds
    _fake_run(to, "vsepp", 1, 31.0)
    args = ["--spec", str(spec_file), "--configs-dir", str(cdir), "--to", str(to)]
    assert main(["zoo", "records", *args, "--whole-configs"]) == 0
    printed = capsys.readouterr().out
    assert "left for later (not every seed done): vsepp" in printed and "copied 1," in printed
    assert (to / "vse" / "official-s0" / "metrics.json").exists()
    assert json.loads((to / "vsepp" / "official-s0" / "metrics.json").read_text())["languages"]["en"]["i2t_r1"] == 30
    assert main(["zoo", "records", *args]) == 0  # without the option: every done run, seed 0 of vsepp too
    assert "copied 2," in capsys.readouterr().out


def test_verdict_changes_counts_claims_with_a_verdict_at_both_scales():
    from polyvse_train.zoo.block import verdict_changes

    def row(v850, v8k, name="a vs b"):
        return ["paper", "claim", name, "1.0", v850, "1", "2.0", "en +2.0", v8k]

    assert verdict_changes([]) == "No claim has a verdict at both scales yet."
    rows = [
        row("holds", "holds"),
        row("does not hold (reversed)", "not distinguishable from noise", "c vs d"),
        row("holds", "not run yet", "e vs f"),
        row("-", "holds", "g vs h"),
    ]
    assert verdict_changes(rows) == (
        "1 of the 2 claims with a verdict at both scales keep it at 8k photos; 1 change: "
        "c vs d (does not hold (reversed) → not distinguishable from noise)."
    )
    assert verdict_changes(rows[:1]) == "1 of the 1 claims with a verdict at both scales keep it at 8k photos."


def test_the_report_names_the_machines_its_runs_recorded_not_its_own():
    from types import SimpleNamespace

    from polyvse_train.zoo.results import machines

    runs = [SimpleNamespace(run={"machine": "AMD EPYC, 2 cores, no GPU"}) for _ in range(2)]
    old = [SimpleNamespace(run={}) for _ in range(3)]
    assert machines(runs) == "AMD EPYC, 2 cores, no GPU"
    assert machines(old).startswith("not recorded")
    mixed = machines(runs + old)
    assert mixed.startswith("AMD EPYC, 2 cores, no GPU (2 runs); not recorded (3 runs)")
    assert machines([]) == "-"


def test_compare_sets_each_config_against_the_earlier_record_on_shared_seeds(tmp_path, capsys):
    """`polyvse zoo compare`: the seeds both records hold, the change of the mean mR and per language, a verdict
    against the seeds' spread, configs one record lacks named; the table goes into results.md's block."""
    from polyvse_train.zoo.compare import compare_records

    before, after = tmp_path / "before", tmp_path / "after"
    for seed, v in enumerate((20.0, 21.0, 22.0)):
        _fake_run(before, "vse", seed, v)
        _fake_run(after, "vse", seed, v + 0.5)  # moved by a quarter of the seeds' spread: within it
    _fake_run(before, "vsepp", 0, 30.0)
    _fake_run(before, "vsepp", 1, 31.0)  # seed 1 not yet retrained: compared on seed 0 alone
    _fake_run(after, "vsepp", 0, 27.0)
    _fake_run(before, "mule-nc", 0, 10.0)
    _fake_run(before, "mule-embn", 0, 12.0)
    _fake_run(after, "mule-embn", 0, 12.0)  # the old record kept in the records folder: not a retraining
    table = compare_records(before, after, ["vsepp", "vse"])
    lines = table.splitlines()
    assert lines[2] == "| vsepp | 0 | 30.0 | 27.0 | -3.0 | en -3.0, de -3.0 | one seed |"
    assert lines[3] == "| vse | 0,1,2 | 21.0 ± 1.0 | 21.5 ± 1.0 | +0.5 | en +0.5, de +0.5 | no |"
    assert "Not yet retrained (the earlier record only): mule-embn, mule-nc." in table and "| mule-embn" not in table
    with pytest.raises(FileNotFoundError, match="no finished official run"):
        compare_records(tmp_path / "empty", after)
    doc = tmp_path / "docs" / "results.md"
    doc.parent.mkdir()
    doc.write_text("x\n<!-- zoo-f8k-full-before-after:start -->\nold\n<!-- zoo-f8k-full-before-after:end -->\ny\n")
    assert (
        main(
            [
                "zoo",
                "compare",
                "--spec",
                str(SPEC),
                "--before",
                str(before),
                "--out",
                str(after),
                "--docs",
                str(doc.parent),
                "--configs",
                "vse,vsepp",
            ]
        )
        == 0
    )
    in_spec_order = compare_records(before, after, ["vse", "vsepp"])
    assert doc.read_text() == (
        "x\n<!-- zoo-f8k-full-before-after:start -->\n" + in_spec_order + "<!-- zoo-f8k-full-before-after:end -->\ny\n"
    )
    # without the block the table is printed
    assert (
        main(
            [
                "zoo",
                "compare",
                "--spec",
                str(SPEC),
                "--before",
                str(before),
                "--out",
                str(after),
                "--docs",
                str(tmp_path / "nowhere"),
                "--configs",
                "vse,vsepp",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.endswith(in_spec_order)
