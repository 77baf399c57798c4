"""DDP on CPU (gloo, 2 processes) gives the same model as one process with the same global batch and seed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import yaml
from safetensors.torch import load_file

from polyvse.distributed import DistInfo
from polyvse_tooling.harness import free_port
from polyvse_train.distributed import gather_with_grad, shard

# SGD without clipping: unlike Adam, its update is proportional to the gradient, so a 2-rank run whose
# gradients were off by a factor (e.g. gathered without gradients) would not match.
CONFIG = dict(
    name="ddp",
    languages=["en", "de"],
    embed_dim=32,
    word_dim=16,
    hidden_dim=32,
    batch_size=24,
    smoke_photos=24,
    smoke_epochs=1,
    lr=0.02,
    optimizer="sgd",
    grad_clip=0.0,
    threads=2,
)


def run(cmd: list[str], env: dict) -> None:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_shard_is_contiguous_and_covers_the_batch():
    idx = list(range(7))
    parts = [shard(idx, DistInfo(rank=r, world_size=3)).tolist() for r in range(3)]
    assert parts == [[0, 1, 2], [3, 4], [5, 6]]
    x = torch.randn(4, 2)
    assert gather_with_grad(x, DistInfo(), [4]) is x


@pytest.mark.parametrize("over", [{}, {"photo_views": 3}], ids=["features", "augmented-views"])
def test_two_rank_run_matches_one_rank_run(shared_data, tmp_path, over):
    """With augmented views (data.photo_views) each rank stages its part of a batch, and reads the views one
    process would."""
    config = tmp_path / "ddp.yaml"
    config.write_text(yaml.safe_dump({**CONFIG, **over}))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    common = ["train", "--config", str(config), "--smoke", "--quiet", "--data-root", str(shared_data)]
    one, two = tmp_path / "one", tmp_path / "two"
    run([sys.executable, "-m", "polyvse_app.cli", *common, "--out", str(one)], env)
    run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(free_port()),
            "-m",
            "polyvse_app.cli",
            *common,
            "--out",
            str(two),
        ],
        env,
    )
    a = load_file(str(one / "checkpoint" / "model.safetensors"))
    b = load_file(str(two / "checkpoint" / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5, msg=f"parameter {k} differs")
    # the runs trained (the comparison is not between two untouched initialisations)
    steps = [l for l in (one / "train_log.jsonl").read_text().splitlines()]
    assert steps and '"step": 0' not in steps[-1]
    assert (two / "metrics.json").exists() and not (two / "state.pt.tmp").exists()


def test_the_process_group_waits_an_hour_or_as_long_as_asked(monkeypatch):
    """Rank 0 preparing data from empty caches outlasts torch's 10-minute NCCL default while the others wait at
    a barrier: the group gets 60 minutes, $POLYVSE_DIST_TIMEOUT or --dist-timeout (mocked torchrun, no group)."""
    from datetime import timedelta

    import pytest
    import torch.distributed as dist

    from polyvse import distributed
    from polyvse.errors import DataError

    timeouts = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.delenv("POLYVSE_DIST_TIMEOUT", raising=False)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, timeout: timeouts.append(timeout))
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    distributed.init_distributed()
    monkeypatch.setenv("POLYVSE_DIST_TIMEOUT", "90")
    distributed.init_distributed()
    distributed.init_distributed(timeout_min=5)  # --dist-timeout wins over the environment
    assert timeouts == [timedelta(minutes=60), timedelta(minutes=90), timedelta(minutes=5)]
    for bad in ("0", "soon", "-3"):
        monkeypatch.setenv("POLYVSE_DIST_TIMEOUT", bad)
        with pytest.raises(DataError, match=r"\$POLYVSE_DIST_TIMEOUT .*positive number"):
            distributed.init_distributed()
    monkeypatch.delenv("WORLD_SIZE")  # a bad value is refused without torchrun too
    with pytest.raises(DataError, match="positive number"):
        distributed.init_distributed()


def test_train_refuses_a_bad_dist_timeout_before_any_work(capsys, tmp_path):
    from polyvse_app.cli import main

    config = tmp_path / "c.yaml"
    config.write_text("name: c\n")
    assert main(["train", "--config", str(config), "--dist-timeout", "0", "--out", str(tmp_path / "o")]) == 2
    assert "--dist-timeout 0.0: give the minutes" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
