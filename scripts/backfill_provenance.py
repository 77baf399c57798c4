"""Provenance for the records written before the schema (issue #52 item 4): backfill or archive, never invent.

Every record under results/ and benchmarks/results/ (what a record is: tests/test_record_provenance.py) that has
no provenance block gets one marked ``reconstructed`` -- ``{"from": [its sources], "by": this script, "unknown":
{field: why}}`` -- in which every field is a fact read from the record's own files or from git:

* commit: the record's own field (``commit``, ``git_commit``, its old ``provenance``), else what the docs or the
  commit message that added it state (``STATED`` below, each with its source);
* dirty: the record's own field (``dirty``, ``git_dirty``, ``tree_clean``), else false where a clean clone or
  tree is stated, else None with the reason;
* machine: the record's own machine field, parsed (or what the docs state); parts not recorded are None with the
  reason;
* command: the record's own (``command``, ``target``) or the one stated, with "[...]" where options are not recorded;
* date: the record's own timestamp, else the date of the commit that wrote this version of it (said in ``from``);
* polyvse_version: ``src/polyvse/_version.py`` at the commit;
* model: the checkpoint path and config the record names, its fingerprint None ("checkpoint not kept"), or why no
  model is measured.

Records that cannot be backfilled that way, or that measure a superseded model, are moved (git mv) under
``results/archive/`` / ``benchmarks/results/archive/`` with the same relative layout (``ARCHIVE`` below, each
with its reason; the archive READMEs list them).

    python scripts/backfill_provenance.py [--dry-run]

Idempotent: a record that has a provenance block is left alone.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BY = "scripts/backfill_provenance.py"
NOT_KEPT = "checkpoint not kept: only the record's files were committed, so its fingerprint cannot be computed"

# -- what cannot be backfilled honestly, or measures a superseded model: moved to the archive -------------------
ARCHIVE = {
    "results/test-polyvse-best-2026-11-27": "the recipe before the 2026-11-28 adoption on test (superseded model)",
    "results/adapt-curves-model.json": "adaptation curves on the product model before the text tail (superseded)",
    "results/adapt-sweep-model.json": "adaptation sweep on the product model before the text tail (superseded)",
    "results/adapt-sweep-dropout-model.json": "adaptation sweep on the product model before the text tail",
    "results/adapt-sweep-loss-model.json": "adaptation sweep on the product model before the text tail",
    "results/adapt-sweep-temperature-model.json": "adaptation sweep on the product model before the text tail",
    "results/adapt-sweep-temperature-03-model.json": "adaptation sweep on the product model before the text tail",
    "results/adapt-sweep-temperature-05-model.json": "adaptation sweep on the product model before the text tail",
    "results/adapt-sweep-temperature-esar-model.json": "adaptation sweep on the product model before the text tail",
    "results/adapt-sweep-word-ngrams-model.json": "adaptation sweep on the product model before the text tail",
    "results/languages-f8k-full-e5-frozen-s0.json": "no commit recorded or stated (the e5-frozen languages table of "
                                                    "2026-11-25)",
    "benchmarks/results/auto_language_e5_frozen.json": "no commit recorded or stated; a model of 2026-11-25",
    "benchmarks/results/auto_language_model.json": "no commit recorded or stated; the product model of 2026-11-25",
    "benchmarks/results/auto_language_val.json": "no commit recorded or stated; the product model of 2026-11-25",
    "benchmarks/results/photo_aspect_test.json": "the product model of 2026-11-24 (superseded); no commit recorded",
    "benchmarks/results/photo_aspect_val.json": "the product model of 2026-11-24 (superseded); no commit recorded",
    "benchmarks/results/tail_threads.json": "no commit recorded or stated (2026-11-24, a 2-core Xeon)",
    "benchmarks/results/tail_precision.json": "no commit recorded or stated (2026-11-28)",
    "benchmarks/results/serve_load.json": "no commit recorded or stated (2026-11-22, the demo model of then)",
    "benchmarks/results/gpu_pixel_h100": "no commit recorded or stated (GPU pixel-path check, 2026-11-26)",
    # val trainings whose training commit is neither recorded nor stated (their evaluation records stay)
    "results/val-polyvse-best/draw-captions-1-photo-views-4-s0-train.json": "training commit not recorded or stated",
    "results/val-polyvse-best/draw-captions-1-photo-views-4-s1-train.json": "training commit not recorded or stated",
    "results/val-polyvse-best/teacher-cs-fr-s0-train.json": "training commit not recorded or stated",
    "results/val-polyvse-best/photo-views-8-s0-train.json": "training commit not recorded or stated",
    "results/val-polyvse-best/bf16-s0-train.json": "training commit not recorded or stated",
    "results/val-polyvse-best/zh-teacher-cs-zh-s0-train.json": "training commit not recorded or stated",
}
# companions that go with an archived record (the same run's log)
ARCHIVE_WITH = {
    "results/val-polyvse-best/draw-captions-1-photo-views-4-s0-train.json": ["draw-captions-1-photo-views-4-s0-"
                                                                            "train_log.jsonl"],
    "results/val-polyvse-best/draw-captions-1-photo-views-4-s1-train.json": ["draw-captions-1-photo-views-4-s1-"
                                                                            "train_log.jsonl"],
    "results/val-polyvse-best/teacher-cs-fr-s0-train.json": ["teacher-cs-fr-s0-train_log.jsonl"],
    "results/val-polyvse-best/photo-views-8-s0-train.json": ["photo-views-8-s0-train_log.jsonl"],
    "results/val-polyvse-best/bf16-s0-train.json": ["bf16-s0-train_log.jsonl"],
}

# -- what the docs and commit messages state about records that do not say it themselves ----------------------
PRODUCT_CONFIG = "configs/f8k-full/polyvse-best.yaml (the product model, runs/model: make model's MODEL_CONFIG)"
HYGIENE = "docs/results.md at cd6dd1b (zoo-hygiene-notes)"
ZOO_F8K_FULL = {"commit": "3549a37", "source": f"{HYGIENE}: 'Retrained from a checkout of 3549a37 on a 2-core AMD "
                "EPYC machine, two one-thread workers (`make zoo-f8k-full`'s command with a list of configs)'; "
                "commit 3145ec0: 'from a checkout of 3549a37, AMD EPYC 2 cores'",
                "command": "BIN=.venv/bin JOBS=2 SPEC=configs/zoo/f8k-full.yaml bash scripts/run-zoo.sh (make "
                           "zoo-f8k-full) [with a list of configs, not recorded]",
                "dirty_why": "a checkout of 3549a37, not stated clean"}
STATED = {  # path prefix -> facts; the first match wins
    "results/zoo-f8k-full/e5-frozen/": {
        "commit": "1523e47", "source": f"{HYGIENE}: 'seeds 1-2 and e5-frozen's three trained in the zoo at one "
        "thread from a checkout of commit 1523e47, on this 2-core AMD EPYC machine'",
        "command": "polyvse zoo run --spec configs/zoo/f8k-full.yaml [options not recorded]",
        "machine": "AMD EPYC, 2 cores", "dirty_why": "a checkout of 1523e47, not stated clean"},
    "results/zoo-f8k-full/polyvse-best/": {
        "source": "commit d64f978: 'trained once after adoption from a clean clone of 0df340d, adopted by the "
        "f8k-full zoo'", "command": "polyvse zoo run --spec configs/zoo/f8k-full.yaml [options not recorded; "
        "the run trained in a clean clone of 0df340d and was adopted by the f8k-full zoo]"},
    "results/zoo-f8k-full/": ZOO_F8K_FULL,
    "results/zoo/": {
        "commit": "51bc8e8", "source": f"{HYGIENE}: 'Retrained from a checkout of 51bc8e8 on a 2-core AMD EPYC "
        "machine, two one-thread workers (`polyvse zoo run --spec configs/zoo/cpu.yaml --jobs 1 --configs LIST`)'",
        "command": "polyvse zoo run --spec configs/zoo/cpu.yaml --jobs 1 --configs LIST [LIST not recorded]",
        "dirty_why": "a checkout of 51bc8e8, not stated clean"},
    "results/f8k-full-e5-frozen-s0-exclusion-rule/": {
        "commit": "4eb4fbf", "source": f"{HYGIENE}: 'e5-frozen trained again under it (seed 0, `polyvse train "
        "--config configs/f8k-full/e5-frozen.yaml`, record results/f8k-full-e5-frozen-s0-exclusion-rule/, the data "
        "code of 4eb4fbf, this 2-core AMD EPYC machine)'",
        "command": "polyvse train --config configs/f8k-full/e5-frozen.yaml [--out not recorded]",
        "machine": "AMD EPYC, 2 cores", "dirty_why": "'the data code of 4eb4fbf': the tree is not stated clean"},
    "results/model-f8k-full-polyvse-best-s0/": {
        "commit": "0b1b75c", "dirty": False, "source": "commit dbe0102: 'make model ... clean clone of 0b1b75c'; "
        "make-model.log (the command); benchmarks/results/make_model.json of the same commit (the machine)",
        "command": ".venv/bin/polyvse train --config configs/f8k-full/polyvse-best.yaml --out runs/model --resume "
                   "--precision auto --set threads=2",
        "machine_from": "benchmarks/results/make_model.json"},
    "results/exclusion-counts.json": {
        "commit": "5c64962", "source": "commit 5c64962 added scripts/exclusion_counts.py and this record together; "
        f"{HYGIENE}: 'python scripts/exclusion_counts.py --out results/exclusion-counts.json'",
        "command": "python scripts/exclusion_counts.py --out results/exclusion-counts.json",
        "dirty_why": "the record was committed with the script that wrote it: the tree it ran in is not stated",
        "model": {"none": "counts of the data sets' photos and captions"}},
    "results/adapt-chosen-model.json": {"dirty": False, "source": "commit 9101d15: 'adapt_curves.py in a clean clone "
                                                                  "of dbe0102'", "config": PRODUCT_CONFIG},
    "results/model-crosslingual.json": {"source": "commit dbe0102: 'the product model's records ... and cross-lingual "
                                                  "record'", "config": PRODUCT_CONFIG},
    "results/languages-model.json": {
        "source": "commit 8cfe6d7: 'language_table.py in a clean clone of dbe0102'",
        "command": "python scripts/language_table.py --checkpoint runs/model/checkpoint --out "
                   "results/languages-model.json [other options not recorded]"},
    "benchmarks/results/latest.json": {
        "source": "commit abd61b5: 'make bench on a clean clone of d497a32'", "command": "make bench",
        "model": {"fingerprint": None, "checkpoint": "runs/model/checkpoint",
                  "config": "configs/f8k-full/polyvse-best.yaml (make model's MODEL_CONFIG at d497a32)"},
        "fingerprint_why": "the product model of 2026-11-27 is not kept and its index's manifest was not recorded"},
    "benchmarks/results/train-side-by-side/": {
        "source": "commit 83ee670: 'run_all.py --only train, clean c8590ce'",
        "command": "python benchmarks/run_all.py --only train",
        "model": {"none": "demo and MULE models trained from scratch for timing (not kept)"}},
    "benchmarks/results/make_model.json": {
        "source": "commit dbe0102: 'benchmarks/results/make_model.json, clean clone of 0b1b75c'",
        "command": "python benchmarks/bench_make_model.py [options not recorded; its target: the record's `target`]",
        "model": {"fingerprint": None, "checkpoint": "runs/model/checkpoint",
                  "config": "configs/f8k-full/polyvse-best.yaml"},
        "fingerprint_why": "the checkpoint make model wrote is not kept (results/model-f8k-full-polyvse-best-s0 holds "
                           "its records)"},
    "benchmarks/results/text_tail_": {"command": "python benchmarks/bench_text_tail.py [options not recorded]",
                                      "model": {"none": "e5-small's pretrained layers (no polyvse checkpoint)"}},
    "benchmarks/results/gpu_finetune_h100": {
        "command": "python benchmarks/bench_gpu_finetune.py [options not recorded]",
        "model": {"none": "a freshly initialised recipe training step (no checkpoint)"}},
    "benchmarks/results/gpu_check_h200": {
        "model": {"none": "checks the GPU paths on demo models trained in a scratch folder (not kept)"}},
    "benchmarks/results/gpu_h200.json": {"model": {"none": "demo trainings and synthetic vectors (not kept)"}},
}
# folders of logs without a JSON record: a provenance.json is written for them (its facts stated)
FOLDER_RECORDS = {
    "benchmarks/results/gpu_recipe_h100": {
        "what": "the logs of one GPU recipe run (scripts/gpu_recipe_val.sh, seed 0) on one NVIDIA H100",
        "commit": "8386299", "dirty": True, "date_of": "bf6010e",
        "source": "configs/gpu/README.md at bf6010e: '`GPU_STAGE=... bash scripts/gpu_recipe_val.sh` (seed 0, bf16, "
                  "resident photos, `--set threads=16`) at commit 8386299 plus the bf16 fix below, on one NVIDIA H100 "
                  "80GB HBM3 (16 CPU cores, that machine's torch 2.11.0+cu130)'",
        "command": "GPU_STAGE=... bash scripts/gpu_recipe_val.sh [GPU_STAGE not recorded]",
        "machine": {"cpu": None, "cores": 16, "memory_gb": None, "gpu": "NVIDIA H100 80GB HBM3", "os": None,
                    "python": None},
        "model": {"fingerprint": None, "checkpoint": "not kept (the device machine's scratch folder)",
                  "config": "configs/gpu/polyvse-full-finetune.yaml"}},
}
# val trainings (metrics.json copies) whose training commit a message or a sibling states
VAL = "results/val-polyvse-best/"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def full_hash(short: str) -> str:
    return git("rev-parse", "--verify", f"{short}^{{commit}}")


def last_commit(path: Path) -> tuple[str, str, str]:
    """(hash, ISO date, subject) of the commit that wrote this version of ``path``."""
    h, date, subject = git("log", "-1", "--format=%H%x00%aI%x00%s", "--", str(path.relative_to(REPO))).split("\0")
    return h, date, subject


def version_at(commit: str) -> str:
    for path in ("src/polyvse/_version.py", "src/polyvse/__init__.py"):
        try:
            m = re.search(r"__version__\s*=\s*[\"']([^\"']+)", git("show", f"{commit}:{path}"))
        except subprocess.CalledProcessError:
            continue
        if m:
            return m.group(1)
    raise LookupError(f"no polyvse version at {commit}")


def parse_machine(value) -> dict:
    """A record's own machine field (string or dict) as the schema's dict; unknown parts None."""
    out = {"cpu": None, "cores": None, "memory_gb": None, "gpu": None, "os": None, "python": None}
    if isinstance(value, dict):
        out.update(cpu=value.get("cpu_model") or value.get("cpu"), cores=value.get("cores"),
                   memory_gb=value.get("memory_gib") or value.get("memory_gb"), gpu=value.get("gpu"),
                   os=value.get("os"), python=value.get("python"))
        return out
    text = str(value)
    if m := re.match(r"(\d+) CPU cores \((.+?)\)(?:, ([\d.]+) GB RAM)?, (no GPU|GPU: [^;]+); (.+?), Python (\S+)$",
                     text):
        out.update(cores=int(m.group(1)), cpu=m.group(2), memory_gb=float(m.group(3)) if m.group(3) else None,
                   gpu=None if m.group(4) == "no GPU" else m.group(4)[5:], os=m.group(5), python=m.group(6))
    elif m := re.match(r"(.+?), (\d+) cores(?:, (no GPU|.+))?$", text):
        out.update(cpu=m.group(1), cores=int(m.group(2)),
                   gpu=None if m.group(3) in (None, "no GPU") else m.group(3))
    return out


def load_walk():
    spec = importlib.util.spec_from_file_location("record_walk", REPO / "tests" / "test_record_provenance.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def stated_for(name: str) -> dict:
    return next((facts for prefix, facts in STATED.items() if name.startswith(prefix)), {})


def own_facts(data: dict) -> dict:
    """What a record says itself: commit, dirty, machine, timestamp, command, checkpoint, config."""
    old = data.get("provenance") if isinstance(data.get("provenance"), dict) else {}
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    facts = {"commit": data.get("commit") or data.get("git_commit") or machine.get("git_commit") or old.get("commit"),
             "dirty": next((v for v in (data.get("dirty"), data.get("git_dirty"), machine.get("git_dirty"),
                                         old.get("dirty")) if isinstance(v, bool)), None),
             "command": data.get("command") or data.get("target"),
             "checkpoint": data.get("checkpoint")}
    if facts["dirty"] is None and isinstance(data.get("tree_clean"), bool):
        facts["dirty"] = not data["tree_clean"]
    if "commit_from" in data:
        facts["commit_from"] = data["commit_from"]
    described = old.get("machine") or data.get("machine")
    if described:
        facts["machine"] = parse_machine(described)
    elif isinstance(data.get("gpu"), dict) and data.get("cpu_cores"):  # a GPU check: its GPU and cores
        facts["machine"] = {**parse_machine(""), "cores": data["cpu_cores"], "gpu": data["gpu"]["name"],
                            "python": data.get("python")}
    for key in ("finished_utc", "when"):
        if data.get(key):
            facts["timestamp"] = data[key].replace("Z", "+00:00")
    if machine.get("date_utc"):
        facts["timestamp"] = machine["date_utc"]
    config = data.get("config_name") or (data.get("config") if isinstance(data.get("config"), str) else
                                         (data.get("config") or {}).get("name"))
    facts["config"] = config
    facts["seed"] = data.get("seed", (data.get("config") or {}).get("seed") if isinstance(data.get("config"), dict)
                                 else None)
    return {k: v for k, v in facts.items() if v is not None}


def val_training_commit(path: Path) -> tuple[str, bool | None, str] | None:
    """A val training record's (metrics.json copy's) commit: its sibling checkpoint training.json's, or the one
    the message that committed it names for the training."""
    base = path.name[: -len("-train.json")]
    for sibling in (f"{base}-checkpoint-training.json", f"{base.removesuffix('-cosine')}-checkpoint-training.json"):
        if (path.parent / sibling).is_file():
            commit = json.loads((path.parent / sibling).read_text()).get("commit")
            if commit:
                return commit, None, f"{VAL}{sibling} (the same run's checkpoint training.json)"
    h, _, _ = last_commit(path)
    message = git("log", "-1", "--format=%B", h)
    for pattern, dirty in ((r"trained and evaluated at ([0-9a-f]{7,40})", None), (r"trained at ([0-9a-f]{7,40})", None),
                           (r"\bclean ([0-9a-f]{7,40})", False)):
        found = set(re.findall(pattern, message))
        if len(found) == 1:
            return found.pop(), dirty, f"commit {h[:7]}'s message: '{re.search(pattern, message).group(0)}'"
    return None


def reconstruct(name: str, files: list[Path]) -> tuple[Path, dict]:
    """(the file to write the block into, the reconstructed block) of one record; LookupError where a fact that
    must be known is not."""
    target = next((f for f in files if f.name == "zoo_run.json"), None) or next(
        (f for f in files if f.name == "metrics.json"), files[0])
    facts: dict = {}
    for f in sorted(files, key=lambda f: f != target):  # the target's own facts first
        for k, v in own_facts(json.loads(f.read_text(encoding="utf-8"))).items():
            facts.setdefault(k, v)
    stated = stated_for(name)
    sources = [f"{f.relative_to(REPO).as_posix()} (its own fields)" for f in files]
    unknown: dict[str, str] = {}
    commit, dirty = facts.get("commit") or stated.get("commit"), facts.get("dirty", stated.get("dirty"))
    if stated.get("source"):
        sources.append(stated["source"])
    if not commit and name.startswith(VAL) and name.endswith("-train.json"):
        found = val_training_commit(target)
        if found:
            commit, dirty, source = found[0], found[1], found[2]
            sources.append(source)
    if not commit:
        raise LookupError(f"{name}: no commit recorded or stated")
    commit = full_hash(commit)
    if dirty is None:
        unknown["dirty"] = stated.get("dirty_why") or "not recorded, and no clean tree is stated"
    h, committed_at, subject = last_commit(target)
    date = facts.get("timestamp")
    if not date:
        date = committed_at
        sources.append(f"the date of commit {h[:7]} ('{subject[:60]}...'), which wrote this version")
    machine = facts.get("machine") or parse_machine(stated.get("machine", ""))
    if stated.get("machine_from"):
        machine = parse_machine(json.loads((REPO / stated["machine_from"]).read_text())["machine"])
    for key, value in machine.items():
        if value is None and key != "gpu":
            unknown[f"machine.{key}"] = "not recorded by the record" + (
                " (the docs name only the CPU and its cores)" if stated.get("machine") else "")
    if machine.get("gpu") is None and not (isinstance(facts.get("machine"), dict) and machine.get("cpu")
                                           and "machine" in facts):
        unknown["machine.gpu"] = "not recorded"
    command = facts.get("command") or stated.get("command")
    data = json.loads(target.read_text(encoding="utf-8"))
    if not command:
        fields = ", ".join(f"{k} {data[k]}" for k in ("checkpoint", "task", "dataset", "split") if k in data)
        unknown["command"] = "not recorded; " + (
            "the record is the trainer's metrics.json (polyvse train or polyvse zoo run)" if "checkpoint" not in data
            and "languages" in data else f"the record is polyvse evaluate --json's ({fields})" if "checkpoint" in data
            else "its writer is not stated")
    model = stated.get("model")
    if model is None:
        checkpoint = facts.get("checkpoint") or (f"{name}checkpoint (the run folder's; not kept)" if name.endswith("/")
                                                  else "not kept (the training's checkpoint folder, path not recorded)")
        config = facts.get("config") or stated.get("config") or ("polyvse-best (a val variant: see the record's name)"
                                         if name.startswith(VAL) else None)
        if not config:
            raise LookupError(f"{name}: no config recorded")
        model = {"fingerprint": None, "checkpoint": checkpoint, "config": config,
                 **({"seed": facts["seed"]} if "seed" in facts else {})}
    if "fingerprint" in model and model["fingerprint"] is None:
        unknown["model.fingerprint"] = stated.get("fingerprint_why") or NOT_KEPT
    notes = threads_note(files)
    block = {"schema": 1, "date": date, "commit": commit, "dirty": dirty, "dirty_files": None,
             "machine": machine, "command": command, "polyvse_version": version_at(commit), "model": model,
             **({"commit_from": facts["commit_from"]} if "commit_from" in facts else {}),
             "reconstructed": {"from": sources, "by": BY, "unknown": unknown, **({"notes": notes} if notes else {})}}
    return target, block


def threads_note(files: list[Path]) -> list[str]:
    """A run whose CPU time says it trained at more threads than its config's ``threads`` (threads is no part of a
    run's identity: a resume or an adopting zoo may train at another count than the config it records)."""
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        wall = data.get("wall_time_s") or data.get("wall_seconds")
        cpu = data.get("cpu_time_s") or data.get("cpu_seconds")
        threads = (data.get("config") or {}).get("threads") if isinstance(data.get("config"), dict) else None
        if wall and cpu and threads and cpu / wall > 1.2 * threads:
            return [f"{f.name}: config threads {threads}, but CPU seconds / wall seconds = {cpu / wall:.2f}: its "
                    f"processes ran more than {threads} core(s) on average, so the config's count is not what it ran "
                    "at (or other threads ran beside training); the threads it trained at were not recorded "
                    "(metrics.json's threads_used since #52)"]
    return []


def write_with_block(path: Path, block: dict) -> None:
    """Add the block at the end of the record, in the file's own JSON layout (indent, ASCII escapes)."""
    raw = path.read_text(encoding="utf-8")
    data = json.loads(raw)
    layout = {"indent": 2, "ensure_ascii": True}
    for indent in (2, 1, None, 4):
        for ascii_ in (True, False):
            if json.dumps(data, indent=indent, ensure_ascii=ascii_) + "\n" * raw.endswith("\n") == raw:
                layout = {"indent": indent, "ensure_ascii": ascii_}
    if "provenance" in data:  # a block of before the schema: kept beside the new one, under its own name
        data["provenance_before_schema"] = data.pop("provenance")
    data["provenance"] = block
    path.write_text(json.dumps(data, **layout) + ("\n" if raw.endswith("\n") else ""), encoding="utf-8")


def archive(rel: str, dry_run: bool) -> list[str]:
    """git mv a record (and its companions) under its root's archive/, keeping the layout; the moves done."""
    root = "benchmarks/results" if rel.startswith("benchmarks/results/") else "results"
    moves = [rel] + [str(Path(rel).parent / c) for c in ARCHIVE_WITH.get(rel, [])]
    done = []
    for src in moves:
        if not (REPO / src).exists():
            continue
        dst = f"{root}/archive/{src[len(root) + 1:]}"
        if not dry_run:
            (REPO / dst).parent.mkdir(parents=True, exist_ok=True)
            git("mv", src, dst)
        done.append(f"{src} -> {dst}")
    return done


def folder_record(rel: str, facts: dict) -> dict:
    """The provenance.json of a folder of logs, from what the docs state about them."""
    commit = full_hash(facts["commit"])
    unknown = {f"machine.{k}": "not recorded" for k, v in facts["machine"].items() if v is None}
    unknown["model.fingerprint"] = NOT_KEPT
    return {"record": facts["what"], "files": sorted(p.name for p in (REPO / rel).iterdir()), "provenance": {
        "schema": 1, "date": git("log", "-1", "--format=%aI", facts["date_of"]), "commit": commit,
        "dirty": facts["dirty"], "dirty_files": None, "machine": facts["machine"], "command": facts["command"],
        "polyvse_version": version_at(commit), "model": facts["model"],
        "reconstructed": {"from": [facts["source"], f"the date of commit {facts['date_of']}"], "by": BY,
                          "unknown": unknown}}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    args = ap.parse_args(argv)
    moved = [m for rel in ARCHIVE for m in archive(rel, args.dry_run)]
    for rel, facts in FOLDER_RECORDS.items():
        if not (REPO / rel / "provenance.json").exists() and not args.dry_run:
            (REPO / rel / "provenance.json").write_text(json.dumps(folder_record(rel, facts), indent=2) + "\n")
    walk = load_walk()
    found, _ = walk.records(REPO)
    done, failed = 0, []
    for name, files in sorted(found.items()):
        if any(name == rel or name.startswith(rel.rstrip("/") + "/") for rel in ARCHIVE):
            continue  # (a dry run: it would have moved)
        if any("schema" in (json.loads(f.read_text(encoding="utf-8")).get("provenance") or {}) for f in files):
            continue  # it has a block of the schema already (written natively, or by an earlier run of this)
        try:
            target, block = reconstruct(name, files)
        except LookupError as exc:
            failed.append(str(exc))
            continue
        if not args.dry_run:
            write_with_block(target, block)
        done += 1
    print(f"archived: {len(moved)} paths; backfilled: {done} records")
    print("\n".join(moved))
    if failed:
        print("cannot backfill (archive them or state their facts):\n" + "\n".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
