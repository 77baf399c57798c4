"""Damaged index files are refused naming the file, never a crash or a silent wrong answer: a truncated or
bit-flipped vectors file, photo list, IVF / HNSW structure or compressed index's codes, and a truncated or garbled
manifest. Opening checks sizes and the contents of small files written since the manifest recorded them (a
memory-mapped vectors file is not read whole to open the index); `polyvse index verify` reads every file. An index
whose manifest predates recorded checksums still opens. Two `polyvse index add` processes on one index: the second
is refused with a message, never interleaved.

The indexes here hold synthetic vectors (no model is needed to open or verify an index), written by the same code
as `polyvse index build`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import polyvse.index.store as store
from polyvse.index import EXACT, HNSW, IVF, IVFPQ, IndexFormatError, PhotoEntry, PhotoIndex, write_compressed_index
from polyvse.index.build import write_new_index
from polyvse.index.store import index_lock
from polyvse_app.cli import main
from test_compressed_index import DIM, checkpoint  # noqa: F401 (an untrained DIM-d model: a fixture)

MODEL_INFO = {"fingerprint": "sha256:0", "similarity": "cosine"}


def vectors(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def write_index(root: Path, kind: str, n: int | None = None, model_info: dict = MODEL_INFO) -> PhotoIndex:
    n = n or (1200 if kind == IVFPQ else 400)  # the compressed structure trains its codes on 1,000 at least
    photos = [PhotoEntry(i, f"{i}.jpg", f"/photos/{i}.jpg") for i in range(n)]
    x = vectors(n)
    with index_lock(root):
        if kind == IVFPQ:
            write_compressed_index(
                root,
                model_info,
                photos,
                (x[i : i + 100] for i in range(0, n, 100)),
                dim=DIM,
                exact_threshold=20_000,
                recall_target=0.9,
                requested=IVFPQ,
            )
        else:
            write_new_index(
                root,
                model_info,
                "cosine",
                photos,
                x,
                kind,
                exact_threshold=100 if kind == IVF else 20_000,
                recall_target=0.9,
            )
    index = PhotoIndex.open(root)
    assert index.kind == kind
    return index


def flip_byte(path: Path, offset: int) -> None:
    """One byte changed in place (size kept), as a bad disk or a stray write would."""
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([b[0] ^ 0x5A]))


def truncate(path: Path, by: int = 7) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - by)


def file_of(root: Path, key: str) -> Path:
    return root / json.loads((root / "manifest.json").read_text())["files"][key]


FILES = [
    (EXACT, "vectors"),
    (EXACT, "photos"),
    (IVF, "vectors"),
    (IVF, "ann"),
    (HNSW, "ann"),
    (IVFPQ, "vectors"),
    (IVFPQ, "ann"),
]  # an IVFPQ index's ann file holds its codes


@pytest.mark.parametrize("kind, key", FILES, ids=[f"{k}-{f}" for k, f in FILES])
@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_file_is_refused_by_name(tmp_path, kind, key, damage, capsys):
    root = tmp_path / "index"
    write_index(root, kind)
    path = file_of(root, key)
    if damage == "truncated":
        truncate(path)
    else:
        flip_byte(path, path.stat().st_size // 2)
    with pytest.raises(IndexFormatError, match=path.name) as err:
        PhotoIndex.open(root)
    assert "damaged" in str(err.value) and "rebuild" in str(err.value)
    assert main(["index", "verify", "--index", str(root)]) == 2
    err = capsys.readouterr().err
    assert path.name in err and "Traceback" not in err


def test_verify_passes_an_intact_index_and_finds_what_opening_does_not_read(tmp_path, monkeypatch, capsys):
    root = tmp_path / "index"
    write_index(root, EXACT)
    assert main(["index", "verify", "--index", str(root)]) == 0
    assert "match their recorded sizes and SHA-256" in capsys.readouterr().out
    # a vectors file too large to read at each open: a flipped byte (size kept) is found by verify only
    monkeypatch.setattr(store, "CHECK_AT_OPEN_BYTES", 1024)
    vec = file_of(root, "vectors")
    flip_byte(vec, vec.stat().st_size - 3)
    PhotoIndex.open(root)  # opens: sizes match, and the file is not read whole to open the index
    assert main(["index", "verify", "--index", str(root)]) == 2
    err = capsys.readouterr().err
    assert vec.name in err and "SHA-256" in err


def test_opening_does_not_hash_files_the_manifest_saw_last(tmp_path, monkeypatch):
    """A fresh search process opens the index without reading its vectors whole: files whose modification time is
    the recorded one are checked by size (the photo list, read whole anyway, by digest too)."""
    root = tmp_path / "index"
    write_index(root, IVF)
    hashed = []
    real = store._sha256
    monkeypatch.setattr(store, "_sha256", lambda path, *a: hashed.append(Path(path).name) or real(path, *a))
    PhotoIndex.open(root)
    assert hashed == [file_of(root, "photos").name]


def test_an_append_hashes_only_its_rows_of_the_shared_vectors_file(tmp_path):
    """The compressed index's raw vectors file is extended in place by each append: its digest segments grow by one,
    the old ones kept, and verify still checks every byte."""
    from polyvse.index.chunked import append_compressed

    root = tmp_path / "index"
    index = write_index(root, IVFPQ)
    first = index.manifest["files"]["sha256"]["vectors"]
    new = [PhotoEntry(1200 + i, f"n{i}.jpg", f"/photos/n{i}.jpg") for i in range(50)]
    with index_lock(root):
        append_compressed(root, index, new, vectors(50, seed=1), MODEL_INFO, IVFPQ, None)
    grown = PhotoIndex.open(root)
    segments = grown.manifest["files"]["sha256"]["vectors"]
    assert grown.count == 1250 and segments[:-1] == first and segments[-1][0] == 1250 * DIM * 4
    assert store.verify_index(root)["digests"]
    flip_byte(file_of(root, "vectors"), 10)  # in the first segment, written before the append
    with pytest.raises(IndexFormatError, match=f"bytes 0..{1200 * DIM * 4}"):
        store.verify_index(root)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda text: text[: len(text) // 2], "unreadable manifest.json"),
        (lambda text: "\udcff" + text, "unreadable manifest.json"),
        (lambda text: text.replace('"count": 400', '"count": "400"'), "count is not a count"),
        (lambda text: text.replace('"count": 400', '"count": 401'), "damaged"),
        (lambda text: text.replace('"vectors": "vectors.', '"vectors": "../../etc/vectors.'), "files.vectors"),
        (lambda text: text.replace('"files": {', '"files": [], "x": {'), "files is not an object"),
    ],
    ids=["truncated", "not-utf8", "count-type", "count-value", "vectors-path", "files-type"],
)
def test_a_damaged_manifest_is_refused_by_name(tmp_path, damage, message):
    root = tmp_path / "index"
    write_index(root, EXACT)
    manifest = root / "manifest.json"
    manifest.write_bytes(damage(manifest.read_text()).encode("utf-8", "surrogateescape"))
    with pytest.raises(IndexFormatError, match=message):
        PhotoIndex.open(root)


def test_a_manifest_without_checksums_still_opens(tmp_path, capsys):
    """Indexes written before the manifest recorded digests: their sizes are still checked."""
    root = tmp_path / "index"
    write_index(root, IVF)
    manifest = json.loads((root / "manifest.json").read_text())
    for key in ("sha256", "mtime_ns"):
        del manifest["files"][key]
    (root / "manifest.json").write_text(json.dumps(manifest))
    assert PhotoIndex.open(root).count == 400
    assert main(["index", "verify", "--index", str(root)]) == 0
    assert "predates recorded checksums" in capsys.readouterr().out
    truncate(file_of(root, "ann"))
    with pytest.raises(IndexFormatError, match="ann.1.faiss is"):
        PhotoIndex.open(root)


# -- concurrent writers ---------------------------------------------------------------------------------------
HOLD_LOCK = """
import sys, time
from pathlib import Path
from polyvse.index.store import index_lock
with index_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_a_second_writer_process_is_refused_while_another_writes(tmp_path, checkpoint):  # noqa: F811
    """The lock is the OS's (filelock): another process holding it, `polyvse index add` exits 2 naming the reason,
    and the index is untouched."""
    from PIL import Image

    import polyvse
    from polyvse.index.store import model_section

    root = tmp_path / "index"
    write_index(root, EXACT, model_info=model_section(polyvse.load(checkpoint), checkpoint))
    (tmp_path / "photos").mkdir()
    Image.new("RGB", (32, 32), (200, 10, 10)).save(tmp_path / "photos" / "red.jpg")
    before = (root / "manifest.json").read_bytes()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        add = subprocess.run(
            [
                sys.executable,
                "-m",
                "polyvse_app.cli",
                "index",
                "add",
                "--index",
                str(root),
                "--images",
                str(tmp_path / "photos"),
                "--quiet",
                "--device",
                "cpu",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert add.returncode == 2, add.stderr
        assert "another `polyvse index` process is writing this index" in add.stderr
        assert "Traceback" not in add.stderr
    finally:
        holder.communicate("\n", timeout=30)
    assert (root / "manifest.json").read_bytes() == before


def _add_in_process(root: str, start: int, out: str) -> None:
    """One writer of the race below: appends 100 photos of its own."""
    from polyvse.errors import DataError

    try:
        with index_lock(Path(root)):
            index = PhotoIndex.open(root)
            new = [PhotoEntry(index.count + i, f"w{start}-{i}.jpg", f"/photos/w{start}-{i}.jpg") for i in range(100)]
            x = np.concatenate([np.asarray(index.vectors), vectors(100, seed=start)])
            time.sleep(3)  # long enough for the other writer to arrive while this one writes
            write_new_index(Path(root), MODEL_INFO, "cosine", index.photos + new, x, EXACT, 20_000, 0.9)
        Path(out).write_text("added")
    except DataError as exc:
        Path(out).write_text(f"refused: {exc}")


def test_two_writers_at_once_never_interleave(tmp_path):
    import multiprocessing

    root = tmp_path / "index"
    write_index(root, EXACT)
    ctx = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"w{i}.txt" for i in range(2)]
    procs = [ctx.Process(target=_add_in_process, args=(str(root), 1000 * (i + 1), str(outs[i]))) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    results = sorted(o.read_text() for o in outs)
    assert results[0] == "added" and results[1].startswith("refused:") and "another `polyvse index`" in results[1]
    index = PhotoIndex.open(root)
    assert index.count == 500 and [p.id for p in index.photos] == list(range(500))
    assert len({p.name.split("-")[0] for p in index.photos[400:]}) == 1  # one writer's photos, not a mix
    assert store.verify_index(root)["digests"]
    leftovers = sorted(f for f in os.listdir(root) if f not in ("manifest.json", ".lock"))
    assert leftovers == sorted([index.manifest["files"]["vectors"], index.manifest["files"]["photos"]])
