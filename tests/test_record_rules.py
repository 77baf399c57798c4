"""Each provenance rule of tests/provenance_rules.py fails on a small git repository holding a bad record (and
passes the good one beside it), and the known list lets through only the cases it names."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from polyvse.provenance import PRODUCT_BUILD_RECORD, no_model, provenance
from provenance_rules import Problem, against_known, all_problems, read_known, substantial
from test_record_provenance import ROOTS, records

GOOD_FP, PHOTO_FP = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def write(repo: Path, rel: str, data) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")


def block(sha: str, **fields) -> dict:
    """A complete provenance block naming commit ``sha``, with ``fields`` replaced."""
    b = {
        **provenance(["polyvse", "evaluate"], model=no_model("synthetic vectors")),
        "commit": sha,
        "dirty": False,
        "dirty_files": [],
    }
    return {**b, **fields}


@pytest.fixture
def repo(tmp_path) -> tuple[Path, str]:
    """A repository with one commit (returned) and a clean record of it."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    write(root, "README.md", "A project.\n")
    base = commit(root, "base")
    write(root, "results/good.json", {"x": 1, "provenance": block(base)})
    commit(root, "a good record")
    return root, base


def problems(root: Path) -> list[Problem]:
    found, _ = records(root)
    return all_problems(root, found, ROOTS)


def rules_of(found: list[Problem], record: str) -> set[str]:
    return {p.rule for p in found if p.record == record}


def test_a_good_record_passes_every_rule(repo):
    root, _ = repo
    assert problems(root) == []


def test_a_commit_not_in_the_history_fails(repo):
    root, _ = repo
    write(root, "results/bad.json", {"x": 1, "provenance": block("f" * 40)})
    commit(root, "a record of no commit")
    found = problems(root)
    assert [str(p) for p in found] == [
        "results/bad.json: [commit-exists] results/bad.json: commit ffffffffffffffffffffffffffffffffffffffff is not "
        "in the repository's history (`git cat-file -e <commit>^{commit}` fails)"
    ]


def test_a_shallow_clone_says_to_fetch_the_history(repo, tmp_path):
    root, _ = repo
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", root.as_uri(), str(clone)], check=True, capture_output=True)
    found = problems(clone)
    assert len(found) == 1 and found[0].rule == "commit-exists" and "is a shallow clone" in found[0].message
    assert "git fetch --unshallow" in found[0].message


def test_a_record_committed_before_its_commit_was_in_the_history_fails(repo):
    """The record names a commit of a branch that is not behind the commit that added it."""
    root, base = repo
    git(root, "checkout", "-qb", "side")
    write(root, "side.txt", "later work")
    side = commit(root, "work on a side branch")
    git(root, "checkout", "-q", "main")
    write(root, "results/early.json", {"x": 1, "provenance": block(side)})
    adding = commit(root, "a record of the side branch's checkout")
    found = problems(root)
    assert rules_of(found, "results/early.json") == {"committed-after-commit"}
    assert f"its commit {side[:12]} is not an ancestor of {adding[:12]}" in str(found[0])
    git(root, "merge", "-q", "--no-edit", "side")  # once merged, a record rewritten after it is fine
    write(root, "results/early.json", {"x": 2, "provenance": block(side)})
    commit(root, "the record written again")
    assert problems(root) == []


def test_a_dirty_record_cited_without_saying_so_fails(repo):
    root, base = repo
    write(root, "results/dirty.json", {"x": 1, "provenance": block(base, dirty=True, dirty_files=["src/a.py"])})
    write(root, "README.md", "A project.\n\nSearch takes 3 ms ([record](results/dirty.json)). Nothing else.\n")
    write(root, "docs/guide.md", "| what | figure |\n|---|---|\n| search | 3 ms (`results/dirty.json`) |\n")
    commit(root, "a dirty record, cited")
    found = problems(root)
    assert [(p.rule, p.record) for p in found] == [("dirty-cited", "results/dirty.json")] * 2
    assert any(
        'cited by README.md without saying so: "Search takes 3 ms ([record](results/dirty.json))."' in str(p)
        for p in found
    )
    write(root, "README.md", "Search takes 3 ms ([record](results/dirty.json), measured on a dirty tree).\n")
    write(root, "docs/guide.md", "| search | 3 ms (`results/dirty.json`, uncommitted tree) |\n")
    commit(root, "the citing sentences say so")
    assert problems(root) == []


def test_a_product_record_with_another_fingerprint_than_the_build_record_fails(repo):
    root, base = repo
    product = {"checkpoint": "/somewhere/runs/model/checkpoint", "config": "f8k-full-polyvse-best"}
    write(
        root,
        PRODUCT_BUILD_RECORD,
        {
            "provenance": block(
                base,
                model={
                    "fingerprint": GOOD_FP,
                    "photo_fingerprint": PHOTO_FP,
                    "checkpoint": "runs/model/checkpoint",
                    "config": "configs/f8k-full/polyvse-best.yaml",
                },
            )
        },
    )
    write(root, "results/same.json", {"provenance": block(base, model={**product, "fingerprint": GOOD_FP})})
    write(root, "results/other.json", {"provenance": block(base, model={**product, "fingerprint": "sha256:deadbeef"})})
    write(
        root,
        "results/photos.json",
        {
            "provenance": block(
                base, model={**product, "fingerprint": GOOD_FP, "photo_fingerprint": "sha256:" + "c" * 64}
            )
        },
    )
    write(
        root,
        "results/trained.json",
        {
            "provenance": block(
                base,
                model={  # the trained checkpoint the product was adapted from, of another build
                    **product,
                    "checkpoint": "runs/model/trained-checkpoint",
                    "fingerprint": "sha256:deadbeef",
                },
            )
        },
    )
    write(root, "results/unrelated.json", {"provenance": block(base, model={**product, "checkpoint": "runs/x/ckpt"})})
    commit(root, "product records")
    found = problems(root)
    assert [(p.rule, p.record) for p in found] == [
        ("product-fingerprint", "results/other.json"),
        ("product-fingerprint", "results/photos.json"),
        ("product-fingerprint", "results/trained.json"),
    ]
    assert f"fingerprint sha256:deadbeef, the build record {PRODUCT_BUILD_RECORD} names {GOOD_FP}" in str(found[0])
    write(
        root,
        PRODUCT_BUILD_RECORD,
        {"provenance": block(base, model={"fingerprint": None, "checkpoint": "runs/model/checkpoint", "config": "x"})},
    )
    commit(root, "a build record without a fingerprint")
    assert all("names no fingerprint, so this claim cannot be checked" in p.message for p in problems(root))


def test_a_product_record_of_the_trained_checkpoint_passes_only_where_the_build_names_it(repo):
    """The product's training record measured its trained checkpoint (adaptation adds parts, changes no other
    weight): its fingerprint is the product's where `polyvse model build`'s own record, beside it, names it as the
    trained checkpoint of the same model; a build.json of another model vouches for nothing."""
    from polyvse_train.report.product_build import PRODUCT_RUN

    root, base = repo
    trained_fp = "sha256:" + "d" * 64
    model = {"fingerprint": GOOD_FP, "photo_fingerprint": PHOTO_FP, "checkpoint": "runs/model/checkpoint"}
    write(root, PRODUCT_BUILD_RECORD, {"provenance": block(base, model={**model, "config": "polyvse-best"})})
    trained = {**model, "fingerprint": trained_fp, "config": "polyvse-best"}
    write(root, f"{PRODUCT_RUN}/metrics.json", {"provenance": block(base, model=trained)})
    # a study run on the trained checkpoint itself, as `make model` leaves it
    study = {**trained, "checkpoint": "runs/model/trained-checkpoint"}
    write(root, "results/study.json", {"provenance": block(base, model=study)})
    write(root, f"{PRODUCT_RUN}/build.json", {"fingerprints": {"trained": trained_fp, "model": "sha256:" + "e" * 64}})
    commit(root, "a build record of another model")
    assert [(p.rule, p.record) for p in problems(root)] == [
        ("product-fingerprint", f"{PRODUCT_RUN}/"),
        ("product-fingerprint", "results/study.json"),
    ]
    write(root, f"{PRODUCT_RUN}/build.json", {"fingerprints": {"trained": trained_fp, "model": GOOD_FP}})
    commit(root, "the build's own record")
    assert problems(root) == []


def test_a_record_of_an_earlier_build_fails_however_the_pages_cite_it(repo):
    """A product record whose fingerprint is not the build record's fails, uncited or cited by a sentence that says
    it is of an earlier build: an earlier build's record is history, moved to the archive."""
    root, base = repo
    model = {"fingerprint": GOOD_FP, "photo_fingerprint": PHOTO_FP, "checkpoint": "runs/model/checkpoint"}
    write(root, PRODUCT_BUILD_RECORD, {"provenance": block(base, model={**model, "config": "polyvse-best"})})
    old = {**model, "fingerprint": "sha256:" + "9" * 64}
    write(root, "benchmarks/results/old.json", {"provenance": block(base, model=old)})
    commit(root, "a record of an earlier build")
    found = problems(root)
    assert [(p.rule, p.record) for p in found] == [("product-fingerprint", "benchmarks/results/old.json")]
    assert "move it to the archive" in found[0].message
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "page.md").write_text(
        "Search takes 3 s ([old](../benchmarks/results/old.json), of an earlier build of the product model).\n"
    )
    assert [(p.rule, p.record) for p in problems(root)] == [("product-fingerprint", "benchmarks/results/old.json")]
    (root / "benchmarks" / "results" / "archive").mkdir()
    subprocess.run(
        ["git", "mv", "benchmarks/results/old.json", "benchmarks/results/archive/old.json"], cwd=root, check=True
    )
    (root / "benchmarks" / "results" / "archive" / "README.md").write_text("History: an earlier build's records.\n")
    commit(root, "the earlier build's record to the archive")
    assert problems(root) == []


def test_a_reconstructed_block_without_reasons_or_machine_fails(repo):
    root, base = repo
    nothing = {k: None for k in ("cpu", "cores", "memory_gb", "os", "python")}
    write(
        root,
        "results/rebuilt.json",
        {
            "provenance": block(
                base,
                dirty=None,
                machine={**nothing, "gpu": None},
                reconstructed={"from": ["git log"], "by": "a script", "unknown": {"dirty": "x"}},
            )
        },
    )
    commit(root, "a reconstructed record")
    found = problems(root)
    assert [p.rule for p in found] == ["reconstructed-substance"] * 2
    messages = " | ".join(p.message for p in found)
    assert "reconstructed.unknown.dirty 'x' is no reason" in messages
    assert "names nothing of its machine (cpu, cores, memory_gb, os, python all None)" in messages
    assert substantial("not recorded by the record") and not substantial("unknown") and not substantial("x")


def test_the_bad_record_of_each_rule_at_once(repo):
    """The copy of a record that the shape test passes: commit 'f'*40, dirty, a product fingerprint of no build and a
    reconstructed block of no machine with reason "x" -- each rule that applies says so."""
    root, base = repo
    write(root, "README.md", "Search takes 3 ms ([record](results/copy.json)).\n")
    write(
        root,
        PRODUCT_BUILD_RECORD,
        {
            "provenance": block(
                base, model={"fingerprint": GOOD_FP, "checkpoint": "runs/model/checkpoint", "config": "x"}
            )
        },
    )
    nothing = {k: None for k in ("cpu", "cores", "memory_gb", "os", "python")}
    bad = block(
        "f" * 40,
        dirty=True,
        machine={**nothing, "gpu": None},
        model={"fingerprint": "sha256:deadbeef", "checkpoint": "runs/model/checkpoint", "config": "x"},
        reconstructed={"from": ["x"], "by": "x", "unknown": {k: "x" for k in ("machine." + m for m in nothing)}},
    )
    write(root, "results/copy.json", {"x": 1, "provenance": bad})
    commit(root, "a bad copy")
    found = problems(root)
    for p in found:
        print(p)
    assert rules_of(found, "results/copy.json") == {
        "commit-exists",
        "dirty-cited",
        "product-fingerprint",
        "reconstructed-substance",
    }


def test_the_known_list_passes_only_its_cases_and_reports_stale_ones(tmp_path):
    listed = tmp_path / "known.yaml"
    listed.write_text(
        "- rule: dirty-cited\n  record: results/a.json\n  reason: cited before the rule existed\n"
        "- rule: commit-exists\n  record: results/gone.json\n  reason: its commit was rewritten away\n"
    )
    known = read_known(listed)
    found = [Problem("dirty-cited", "results/a.json", "m"), Problem("dirty-cited", "results/b.json", "m")]
    new, stale = against_known(found, known)
    assert new == [found[1]] and stale == ["results/gone.json [commit-exists]"]
    listed.write_text("- rule: dirty-cited\n  record: results/a.json\n  reason: x\n")
    with pytest.raises(ValueError, match="entry 1 .* needs rule .*, record and a reason"):
        read_known(listed)
