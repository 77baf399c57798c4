"""Progress output (polyvse.util.progress): no bar refreshes when stderr is not a terminal (a log file, a pipe, CI),
one plain line per stage instead; on a terminal the tqdm bar is still drawn.

capsys replaces stderr with a non-terminal stream, as `polyvse demo > log 2>&1` does.
"""

from __future__ import annotations

import os
import pty
import re
import select

from polyvse.data import fetch as fetch_mod
from polyvse.features.backbones import get_extractor
from polyvse.features.cache import extract_features
from polyvse.modules.pretrained import encode_cached
from polyvse.util.progress import Progress, track
from polyvse_train.config import TrainConfig
from polyvse_train.train import train
from test_data_cli import _serve_tree, web  # noqa: F401  (web: the fake-HTTP fixture)
from test_pretrained import FakeEncoder
from test_train_e2e import SMALL

SECONDS = r"\d+(\.\d)? s"
EPOCHS = {"smoke_epochs": 2, "batch_size": 16, "smoke_max_batches": 3}  # 3 batches of the 48-photo slice


def _lines(err: str) -> list[str]:
    assert "\r" not in err, f"carriage-return refreshes in a non-terminal stream: {err[:300]!r}"
    return err.splitlines()


def test_training_writes_one_line_per_epoch(shared_data, tmp_path, capsys):
    cfg = TrainConfig(**{**SMALL, **EPOCHS})
    train(cfg, tmp_path, shared_data, smoke=True, progress=True)
    lines = _lines(capsys.readouterr().err)
    epochs = [line for line in lines if line.startswith("epoch ")]
    assert len(epochs) == 2, lines
    for i, line in enumerate(epochs, 1):
        assert re.fullmatch(rf"epoch {i}/2: loss \d+\.\d{{3}}, {SECONDS}", line), line
    assert len([line for line in lines if line.startswith("checking feature cache: ")]) == 1


def test_a_stopped_epoch_says_where_it_stopped(shared_data, tmp_path, capsys):
    cfg = TrainConfig(**{**SMALL, **EPOCHS})
    assert train(cfg, tmp_path, shared_data, smoke=True, progress=True, max_steps=4) == {"stopped_at_step": 4}
    epochs = [line for line in _lines(capsys.readouterr().err) if line.startswith("epoch ")]
    assert epochs[0].startswith("epoch 1/2: loss ")
    assert re.fullmatch(rf"epoch 2/2: stopped at step 4 \(batch 1 of 3\), {SECONDS}", epochs[1]), epochs


def test_feature_extraction_writes_one_line_per_stage(shared_data, tmp_path, capsys):
    photos = sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:3]
    extract_features(photos, get_extractor("efficientnet-lite0"), tmp_path / "cache", batch_size=1)
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 2, lines
    assert re.fullmatch(rf"checking feature cache: 3 photos, 0 in the cache, {SECONDS}", lines[0])
    assert re.fullmatch(rf"extracting efficientnet-lite0 features: 3 photos, {SECONDS}", lines[1])


def test_sentence_embedding_writes_one_line(tmp_path, capsys):
    encode_cached(FakeEncoder(), ["a", "b", "c"], "de", tmp_path, shard_size=1)
    assert re.fullmatch(rf"fake \[de\]: 3 sentences, {SECONDS}", "\n".join(_lines(capsys.readouterr().err)))


def test_fetch_writes_one_line_per_corpus(web, tiny_root, tmp_path, capsys):
    _serve_tree(web, fetch_mod.MULTI30K_BASE, tiny_root / "multi30k")
    fetch_mod.fetch("multi30k", tmp_path / "down", progress=True)  # per-file byte bars inside: no lines of their own
    fetch_mod.fetch("multi30k", tmp_path / "copy", source_dir=tiny_root, progress=True)
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 2, lines
    assert re.fullmatch(rf"multi30k: downloading: 48 files, {SECONDS}", lines[0])
    assert re.fullmatch(rf"multi30k: copying: 48 files, {SECONDS}", lines[1])


def test_quiet_and_unfinished_stages_write_nothing(capsys):
    for _ in track(range(5), desc="quiet", enabled=False):
        pass
    for i in track(range(5), desc="left early"):
        if i == 2:
            break
    try:
        with Progress(total=3, desc="failed") as bar:
            bar.update()
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert capsys.readouterr().err == ""


def _read_all(fd: int) -> str:
    """Everything written to the pty so far: the kernel hands it over asynchronously, so read until it is quiet."""
    data = b""
    while select.select([fd], [], [], 2.0)[0]:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # EIO: the terminal side is closed and drained
            break
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return data.decode()


def test_a_terminal_gets_the_bar_and_then_the_line():
    controller, terminal = pty.openpty()
    with os.fdopen(terminal, "w", encoding="utf-8") as tty:
        assert tty.isatty()
        with Progress(total=3, desc="work", unit="batch", file=tty, mininterval=0) as bar:
            for _ in range(3):  # a few refreshes: they must fit the pty's buffer, nobody reads it meanwhile
                bar.update()
        tty.flush()
    out = _read_all(controller)
    assert "\r" in out and "3/3" in out  # tqdm's live bar
    assert re.search(rf"work: 3 batches, {SECONDS}\r?\n$", out.replace("\r\n", "\n")), out[-200:]
