"""`polyvse data list|fetch|export` and polyvse.data.fetch: the mirror path on the real files, the
download path with requests replaced by a fake (no network in tests)."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
import requests

from conftest import make_tiny_root
from polyvse.data import fetch as fetch_mod
from polyvse.data.f8kml import load_f8kml
from polyvse.data.fetch import FetchResult, fetch
from polyvse.data.multi30k import Multi30kReader
from polyvse.errors import DataError
from polyvse_app.cli import main


def _files(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _parts(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".part")]


# -- list ------------------------------------------------------------------------------------------------
def test_list(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.strip().splitlines()]
    assert names[0] == "f8k-ml"
    assert {"f8k-ml-text", "multi30k", "flickr8k", "flickr8kcn", "coco", "generic"} <= set(names)


# -- fetch from the local mirror (real files) ------------------------------------------------------------
@pytest.fixture(scope="module")
def mirrored(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("dataroot")
    assert main(["data", "fetch", "all", "--from", str(shared_data), "--data-root", str(root), "--quiet"]) == 0
    return root


def test_mirror_copies_everything(mirrored, shared_data):
    want = {k: v for k, v in _files(shared_data).items() if k.split("/")[0] in fetch_mod.FOLDERS}
    assert _files(mirrored) == want
    for rel in (
        "flickr8k/captions.txt",
        "multi30k/data/task2/raw/val.3.de.gz",
        "flickr8kcn/data/flickr8kzhc.caption.txt",
    ):
        assert (mirrored / rel).read_bytes() == (shared_data / rel).read_bytes()
    assert (mirrored / "flickr8k/images/1000268201_693b08cb0e.jpg").stat().st_mtime == (
        shared_data / "flickr8k/images/1000268201_693b08cb0e.jpg"
    ).stat().st_mtime
    assert not _parts(mirrored)
    assert os.access(mirrored / "flickr8k/captions.txt", os.W_OK)  # copies are ours to manage


def test_mirror_rerun_is_cheap_and_repairs(mirrored, shared_data):
    again = fetch("all", mirrored, source_dir=shared_data, progress=False)
    assert again.written == [] and len(again.skipped) == len(_files(mirrored)) > 900
    # a damaged file is copied again; a merely touched one is recognised by its hash
    damaged = mirrored / "flickr8kcn/data/flickr8kval.txt"
    damaged.write_text("oops\n")
    touched = mirrored / "multi30k/data/task1/image_splits/val.txt"
    os.utime(touched, (1, 1))
    res = fetch("flickr8kcn", mirrored, source_dir=shared_data, progress=False)
    assert res.written == ["flickr8kcn/data/flickr8kval.txt"]
    res = fetch("multi30k", mirrored, source_dir=shared_data, progress=False)
    assert res.written == [] and "multi30k/data/task1/image_splits/val.txt" in res.skipped
    assert damaged.read_bytes() == (shared_data / "flickr8kcn/data/flickr8kval.txt").read_bytes()


def test_mirror_fetch_then_load(mirrored, shared_data):
    a, b = load_f8kml(mirrored), load_f8kml(shared_data)
    assert a.captions == b.captions and set(a.photos) == set(b.photos)


def test_incomplete_mirror_refused(tmp_path, shared_data, capsys):
    mirror = tmp_path / "mirror"
    (mirror / "multi30k/data/task1/image_splits").mkdir(parents=True)
    shutil.copy(shared_data / "multi30k/data/task1/image_splits/val.txt", mirror / "multi30k/data/task1/image_splits")
    rc = main(["data", "fetch", "multi30k", "--from", str(mirror), "--data-root", str(tmp_path / "root"), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("polyvse: error: ") and "lacks multi30k/data/" in err
    assert main(["data", "fetch", "muse", "--from", str(tmp_path / "nowhere"), "--data-root", str(tmp_path)]) == 2
    assert main(["data", "fetch", "everything", "--data-root", str(tmp_path)]) == 2
    assert "choose one of" in capsys.readouterr().err


# -- export ----------------------------------------------------------------------------------------------
def test_export_to_file(mirrored, tmp_path, capsys):
    out = tmp_path / "test.jsonl"
    rc = main(
        ["data", "export", "--dataset", "f8k-ml", "--split", "test", "--out", str(out), "--data-root", str(mirrored)]
    )
    assert rc == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    expected = [c for c in load_f8kml(mirrored) if c.split == "test"]
    assert len(rows) == len(expected) > 0
    assert set(rows[0]) == {"image", "lang", "caption", "source", "split"}
    assert {r["split"] for r in rows} == {"test"}
    assert len({r["image"] for r in rows}) == 125 and all(r["image"].isdigit() for r in rows)
    assert {r["lang"] for r in rows} == {"en", "de", "fr", "cs", "zh"}
    assert "wrote" in capsys.readouterr().err


def test_export_stdout_uses_env_data_root(mirrored, monkeypatch, capsys):
    monkeypatch.setenv("POLYVSE_DATA", str(mirrored))
    assert main(["data", "export", "--split", "val"]) == 0  # default dataset f8k-ml, default --out -
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(json.loads(line)["split"] == "val" for line in lines)
    assert len({json.loads(line)["image"] for line in lines}) == 96


def test_export_errors(mirrored, tmp_path, capsys):
    assert main(["data", "export", "--dataset", "nope", "--data-root", str(mirrored)]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert main(["data", "export", "--split", "dev", "--data-root", str(mirrored)]) == 2
    assert "no captions in split 'dev'" in capsys.readouterr().err
    assert main(["data", "export", "--opt", "colour=red", "--data-root", str(mirrored)]) == 2
    assert "no option 'colour'" in capsys.readouterr().err
    assert main(["data", "export", "--data-root", str(tmp_path / "empty")]) == 2
    assert "polyvse data fetch" in capsys.readouterr().err


def test_export_generic_with_options(tmp_path, capsys):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.jpg").write_bytes(b"x")
    (tmp_path / "caps.csv").write_text("image,caption\na.jpg,A dog\nb.jpg,Missing photo\n")
    out = tmp_path / "g.jsonl"
    rc = main(
        [
            "data",
            "export",
            "--dataset",
            "generic",
            "--opt",
            f"images={tmp_path / 'img'}",
            "--opt",
            f"captions={tmp_path / 'caps.csv'}",
            "--opt",
            "default_lang=en",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    assert [json.loads(x)["image"] for x in out.read_text().splitlines()] == ["a.jpg"]
    assert "caps.csv:3: photo file not found" in capsys.readouterr().err


# -- fetch by download (requests faked) --------------------------------------------------------------------
class FakeResponse:
    def __init__(self, status: int, body: bytes = b"", headers: dict | None = None, fail_after: int | None = None):
        self.status_code = status
        self._body = body
        self.headers = {"Content-Length": str(len(body))} if headers is None else headers
        self._fail_after = fail_after

    def iter_content(self, chunk_size: int):
        for i in range(0, len(self._body), chunk_size):
            if self._fail_after is not None and i >= self._fail_after:
                raise requests.ConnectionError("connection reset")
            yield self._body[i : i + chunk_size]

    def json(self):
        return json.loads(self._body)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeWeb:
    """url -> FakeResponse factory; records every GET."""

    def __init__(self):
        self.routes: dict[str, object] = {}
        self.calls: list[str] = []

    def session_class(self):
        web = self

        class Session:
            def __init__(self):
                self.headers = {}

            def get(self, url, stream=False, timeout=None):
                web.calls.append(url)
                assert timeout is not None  # never hang forever
                route = web.routes.get(url)
                if route is None:
                    return FakeResponse(404, b"not found")
                if isinstance(route, Exception):
                    raise route
                return route() if callable(route) else FakeResponse(200, route)

        return Session


@pytest.fixture()
def web(monkeypatch):
    w = FakeWeb()
    monkeypatch.setattr(fetch_mod.requests, "Session", w.session_class())
    return w


@pytest.fixture()
def tiny_source(tmp_path):
    return make_tiny_root(tmp_path / "upstream")


def _serve_tree(web: FakeWeb, base_url: str, folder: Path, prefix: str = "") -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            web.routes[base_url + prefix + p.relative_to(folder).as_posix()] = p.read_bytes()


def test_download_multi30k(web, tiny_source, tmp_path):
    _serve_tree(web, fetch_mod.MULTI30K_BASE, tiny_source / "multi30k")
    root = tmp_path / "root"
    res = fetch("multi30k", root, progress=False)
    assert len(res.written) == 48 and res.skipped == []
    assert all(u.startswith("https://raw.githubusercontent.com/multi30k/dataset/") for u in web.calls)
    assert (root / "multi30k/data/task1/raw/train.de.gz").read_bytes() == (
        tiny_source / "multi30k/data/task1/raw/train.de.gz"
    ).read_bytes()
    assert len(Multi30kReader(root).read()) == 56
    n = len(web.calls)
    again = fetch("multi30k", root, progress=False)
    assert again.written == [] and len(web.calls) == n  # nothing downloaded twice
    assert not _parts(root)


def test_download_http_error_leaves_no_file(web, tiny_source, tmp_path):
    _serve_tree(web, fetch_mod.MULTI30K_BASE, tiny_source / "multi30k")
    missing = fetch_mod.MULTI30K_BASE + "data/task2/raw/val.3.de.gz"
    del web.routes[missing]
    root = tmp_path / "root"
    with pytest.raises(DataError) as exc:
        fetch("multi30k", root, progress=False)
    assert "HTTP 404" in str(exc.value) and missing in str(exc.value)
    assert not (root / "multi30k/data/task2/raw/val.3.de.gz").exists() and not _parts(root)


def test_download_truncated_or_broken(web, tmp_path):
    url = fetch_mod.FLICKR8KCN_BASE + "README.md"
    web.routes[url] = lambda: FakeResponse(200, b"short", headers={"Content-Length": "100"})
    with pytest.raises(DataError, match="incomplete"):
        fetch("flickr8kcn", tmp_path, progress=False)
    web.routes[url] = lambda: FakeResponse(200, b"x" * 200_000, fail_after=65536)
    with pytest.raises(DataError, match="broke off"):
        fetch("flickr8kcn", tmp_path, progress=False)
    web.routes[url] = requests.ConnectionError("no route to host")
    with pytest.raises(DataError, match="cannot download .*ConnectionError"):
        fetch("flickr8kcn", tmp_path, progress=False)
    assert not (tmp_path / "flickr8kcn/README.md").exists() and not _parts(tmp_path)


def test_download_gzip_encoded_text_is_not_a_size_error(web, tiny_source, tmp_path):
    _serve_tree(web, fetch_mod.FLICKR8KCN_BASE, tiny_source / "flickr8kcn")
    web.routes[fetch_mod.FLICKR8KCN_BASE + "README.md"] = lambda: FakeResponse(
        200, b"# Flickr8K-CN\n", headers={"Content-Length": "7", "Content-Encoding": "gzip"}
    )
    res = fetch("flickr8kcn", tmp_path, progress=False)
    assert "flickr8kcn/README.md" in res.written


def _serve_flickr8k(web: FakeWeb, source_root: Path) -> list[str]:
    names = sorted(p.name for p in (source_root / "flickr8k/images").glob("*.jpg"))
    tree = [{"path": "data/Images/" + n, "type": "blob"} for n in names]
    tree += [
        {"path": "data/Images", "type": "tree"},
        {"path": "README.md", "type": "blob"},
        {"path": "data/parallel_pairs/text/1.txt", "type": "blob"},
    ]
    web.routes[fetch_mod.SIC_TREE_URL] = json.dumps({"tree": tree, "truncated": False}).encode()
    for n in names:
        web.routes[fetch_mod.SIC_RAW_BASE + "data/Images/" + n] = (source_root / "flickr8k/images" / n).read_bytes()
    enc = source_root / "flickr8kcn/data/flickr8kenc.caption.txt"
    web.routes[fetch_mod.FLICKR8KCN_BASE + "data/flickr8kenc.caption.txt"] = enc.read_bytes()
    return names


def test_download_flickr8k_rebuilds_the_mirror_files(web, shared_data, tmp_path):
    """On the real files: photos + the caption CSVs rebuilt from flickr8kenc equal the mirror byte for byte."""
    names = _serve_flickr8k(web, shared_data)
    assert len(names) == 850
    root = tmp_path / "root"
    res = fetch("flickr8k", root, progress=False)
    assert len(res.written) == 850 + 3
    for rel in ("flickr8k/all_captions.txt", "flickr8k/captions.txt"):
        assert (root / rel).read_bytes() == (shared_data / rel).read_bytes(), rel
    assert sorted(p.name for p in (root / "flickr8k/images").iterdir()) == names


def test_download_then_load_tiny_f8kml(web, tiny_source, tmp_path):
    _serve_tree(web, fetch_mod.MULTI30K_BASE, tiny_source / "multi30k")
    _serve_tree(web, fetch_mod.FLICKR8KCN_BASE, tiny_source / "flickr8kcn")
    _serve_flickr8k(web, tiny_source)
    root = tmp_path / "root"
    for name in ("multi30k", "flickr8kcn", "flickr8k"):
        assert main(["data", "fetch", name, "--data-root", str(root), "--quiet"]) == 0
    assert load_f8kml(root).captions == load_f8kml(tiny_source).captions


def test_download_muse_and_sts(web, tmp_path):
    for pair in fetch_mod.MUSE_FULL_PAIRS:
        web.routes[f"{fetch_mod.MUSE_BASE}{pair}.txt"] = b"the der\n"
    for pair in fetch_mod.MUSE_SPLIT_PAIRS:
        for r in fetch_mod.MUSE_RANGES:
            web.routes[f"{fetch_mod.MUSE_BASE}{pair}.{r}.txt"] = b"dog hund\n"
    res = fetch("muse", tmp_path, progress=False)
    assert (tmp_path / "muse/full/en-de.txt").read_bytes() == b"the der\n"
    assert (tmp_path / "muse/splits/en-ja.5000-6500.txt").is_file()
    assert len(res.written) == len(fetch_mod.MUSE_FULL_PAIRS) + 2 * len(fetch_mod.MUSE_SPLIT_PAIRS)

    for url, folder, files in fetch_mod.STS_ARCHIVES:
        buf = io.BytesIO()
        if url.endswith(".zip"):
            with zipfile.ZipFile(buf, "w") as zf:
                for f in files:
                    zf.writestr(f"some-dir/{f}", f"{folder}/{f}\n")
                zf.writestr("some-dir/STS.input.OTHER.txt", "not kept\n")
        else:
            with tarfile.open(fileobj=buf, mode="w:gz") as tf:
                for f in files:
                    data = f"{folder}/{f}\n".encode()
                    info = tarfile.TarInfo(f"stsbenchmark/{f}")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
        web.routes[url] = buf.getvalue()
    res = fetch("sts", tmp_path, progress=False)
    assert (
        tmp_path / "sts/STS12-en-test/STS.input.MSRvid.txt"
    ).read_text() == "sts/STS12-en-test/STS.input.MSRvid.txt\n"
    assert (tmp_path / "sts/STSBenchmark/sts-test.csv").is_file()
    assert not (tmp_path / "sts/STS12-en-test/STS.input.OTHER.txt").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith("tmp")] == []
    assert fetch("sts", tmp_path, progress=False).written == []


def test_download_error_through_cli(web, tmp_path, capsys):
    assert main(["data", "fetch", "multi30k", "--data-root", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("polyvse: error: cannot download https://raw.githubusercontent.com/multi30k/") and "404" in err
    )


def test_fetch_result_summary():
    r = FetchResult("x", ["a"], ["b", "c"])
    assert r.summary() == "x: 1 file(s) written, 2 already up to date"
