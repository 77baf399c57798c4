"""Shared fixtures. Real-data tests read ../shared/data (the public-repository mirror) read-only."""

from __future__ import annotations

import csv
import gzip
import os
import struct
import zlib
from pathlib import Path

import pytest

from polyvse.data._io import caption_key

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The mirror of the public data repositories; its layout is the data-root layout."""
    root = Path(os.environ.get("POLYVSE_TEST_DATA", REPO.parent / "shared" / "data")).resolve()
    if not (root / "flickr8k" / "images").is_dir():
        pytest.fail(f"real data not found at {root}: put ../shared/data beside the repo or set POLYVSE_TEST_DATA")
    return root


# -- tiny corpora in the public layouts (data-layer tests) ------------------------------------------------
def _gz(path: Path, lines: list[str]) -> None:
    import gzip

    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))


def _txt(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_tiny_root(root: Path) -> Path:
    """A data root with a few photos/captions per corpus, same file formats as the public data.

    Photos at hand (flickr8k/images): 100 (train), 300 (val), 500 (test), 700 (in no split list).
    Multi30K: 100, 200 train; 300 val; 400 test_2016. Flickr8K all_captions adds 200, 400, 600.
    """
    m = root / "multi30k" / "data"
    t1 = {"train": ["100.jpg", "200.jpg"], "val": ["300.jpg"], "test_2016_flickr": ["400.jpg"]}
    for split, imgs in t1.items():
        _txt(m / "task1" / "image_splits" / f"{split}.txt", "".join(i + "\n" for i in imgs))
        for lang in ("en", "de", "fr", "cs"):
            _gz(m / "task1" / "raw" / f"{split}.{lang}.gz", [f"{lang} t1 {split} {i[:-4]}." for i in imgs])
    t2 = {"train": ["100.jpg", "200.jpg"], "val": ["300.jpg"], "test_2016": ["400.jpg"]}
    for split, imgs in t2.items():
        _txt(m / "task2" / "image_splits" / f"{split}_images.txt", "".join(i + "\n" for i in imgs))
        for k in range(1, 6):
            for lang in ("en", "de"):
                if lang == "en" and k == 1:  # task2 en #1 repeats the task1 English line (as in Multi30K)
                    lines = [
                        f"{lang} t1 {split if split != 'test_2016' else 'test_2016_flickr'} {i[:-4]}." for i in imgs
                    ]
                else:
                    lines = [f"{lang} t2.{k} {split} {i[:-4]}" for i in imgs]
                _gz(m / "task2" / "raw" / f"{split}.{k}.{lang}.gz", lines)
    f = root / "flickr8k"
    (f / "images").mkdir(parents=True, exist_ok=True)
    photos = {"100": "100_aa", "300": "300_bb", "500": "500_cc", "700": "700_dd"}
    for stem in photos.values():
        (f / "images" / f"{stem}.jpg").write_bytes(b"\xff\xd8\xff\xe0fakejpeg")
    rows = ["image,caption"]
    for pid, stem in photos.items():
        rows += [f"{stem}.jpg,Flickr caption {j} of {pid} ." for j in range(5)]
    rows[1] = "100_aa.jpg,en t1 train 100 ."  # the task1 English line again, tokenised differently
    rows[2] = '100_aa.jpg,"A dog, a ball and ""quotes"" ."'
    _txt(f / "captions.txt", "\n".join(rows) + "\n")
    all_rows = list(rows)
    for pid, stem in {"200": "200_ee", "400": "400_ff", "600": "600_gg"}.items():
        all_rows += [f"{stem}.jpg,Flickr caption {j} of {pid} ." for j in range(5)]
    _txt(f / "all_captions.txt", "\n".join(all_rows) + "\n")
    c = root / "flickr8kcn" / "data"
    _txt(root / "flickr8kcn" / "README.md", "# Flickr8K-CN (tiny)\n")
    all_stems = {**photos, "200": "200_ee", "400": "400_ff", "600": "600_gg"}
    import csv as _csv

    enc, counter = [], {}
    for image, text in list(_csv.reader(all_rows))[1:]:  # the English captions, as Flickr8K-CN ships them
        k = counter[image] = counter.get(image, -1) + 1
        enc.append(f"{image}#enc#{k} {text}")
    _txt(c / "flickr8kenc.caption.txt", "\n".join(enc) + "\n")
    for variant, lang_word in (("zhc", "中文"), ("zhb", "百度"), ("zhg", "谷歌")):
        lines = []
        for pid, stem in all_stems.items():
            for j in range(5):
                lines.append(f"{stem}.jpg#{variant}#{j} {lang_word}{pid}号{j}。")
        if variant == "zhc":
            lines[1] = lines[0].replace("#0 ", "#1 ")  # a native caption repeated for one photo
        _txt(c / f"flickr8k{variant}.caption.txt", "\n".join(lines) + "\n")
    _txt(c / "flickr8kzhmtest.captions.txt", "500_cc.jpg#zhm#0 人工翻译五百。\n")
    _txt(c / "flickr8ktrain.txt", "100_aa\n200_ee\n600_gg\n")
    _txt(c / "flickr8kval.txt", "300_bb\n")
    _txt(c / "flickr8ktest.txt", "500_cc\n400_ff\n")
    return root


@pytest.fixture()
def tiny_root(tmp_path) -> Path:
    return make_tiny_root(tmp_path / "data")


def png_bytes(width: int, height: int) -> bytes:
    """A valid 1-bit greyscale PNG of any size; all-zero rows compress ~1000:1, so huge ones stay small
    (decompression-bomb tests)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    comp = zlib.compressobj(9)
    row = b"\x00" * (1 + (width + 7) // 8)
    idat = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def write_muse_full(root: Path, src: str, tgt: str, n_words: int = 6600) -> list[tuple[str, str]]:
    """``<root>/muse/full/<src>-<tgt>.txt`` with source word ``s<i>`` -> target ``t<i>`` for i < n_words
    (rank i = i; with the default size both lexicon parts are populated). Returns the pairs."""
    pairs = [(f"s{i}", f"t{i}") for i in range(n_words)]
    _txt(root / "muse" / "full" / f"{src}-{tgt}.txt", "".join(f"{s} {t}\n" for s, t in pairs))
    return pairs


# -- caches: never written into the read-only data mirror --------------------------------------------------
@pytest.fixture(scope="session", autouse=True)
def _feature_cache_outside_data(tmp_path_factory):
    """Feature caches go to a per-session temp folder (shared by all tests of the session)."""
    old = os.environ.get("POLYVSE_CACHE")
    os.environ["POLYVSE_CACHE"] = str(tmp_path_factory.mktemp("polyvse-cache"))
    yield
    if old is None:
        os.environ.pop("POLYVSE_CACHE", None)
    else:
        os.environ["POLYVSE_CACHE"] = old


# -- an independent parse of the public files, for the hygiene tests ------------------------------------
@pytest.fixture(scope="session")
def raw(shared_data):
    """Independent parse of the public files: {(photo_id, lang, text)} per source + split lists."""
    root = shared_data
    images = {n.split("_")[0]: n for n in os.listdir(root / "flickr8k" / "images") if n.endswith(".jpg")}
    images224 = {n.split("_")[0]: n for n in os.listdir(root / "flickr8k-224" / "images") if n.endswith(".jpg")}
    splits = {}
    for s in ("train", "val", "test"):
        for line in (root / "flickr8kcn" / "data" / f"flickr8k{s}.txt").read_text().split():
            splits[line.split("_")[0]] = s
    m30k_split = {}
    caps = []  # (photo_id, lang, text, source)
    base = root / "multi30k" / "data"
    for task, names, langs, suffix in (
        ("task1", ("train", "val", "test_2016_flickr"), ("en", "de", "fr", "cs"), ""),
        ("task2", ("train", "val", "test_2016"), ("en", "de"), "_images"),
    ):
        for s in names:
            ids = [x[:-4] for x in (base / task / "image_splits" / f"{s}{suffix}.txt").read_text().split("\n") if x]
            for i in ids:
                m30k_split.setdefault(i, s)
            files = (
                [f"{s}.{lang}.gz" for lang in langs]
                if task == "task1"
                else [f"{s}.{k}.{lang}.gz" for k in range(1, 6) for lang in langs]
            )
            for f in files:
                lang = f.split(".")[-2]
                lines = gzip.open(base / task / "raw" / f, "rt", encoding="utf-8").read().split("\n")[:-1]
                assert len(lines) == len(ids)
                caps += [(i, lang, t.strip(), "multi30k-" + task) for i, t in zip(ids, lines)]
    with open(root / "flickr8k" / "all_captions.txt", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    caps += [(img.split("_")[0], "en", t.strip(), "flickr8k") for img, t in rows]
    for v in ("zhc", "zhb", "zhg", "zhm"):
        name = "flickr8kzhmtest.captions.txt" if v == "zhm" else f"flickr8k{v}.caption.txt"
        for line in (root / "flickr8kcn" / "data" / name).read_text(encoding="utf-8").split("\n"):
            if line.strip():
                key, text = line.split(" ", 1)
                caps.append((key.split("_")[0], "zh", text.strip(), "flickr8kcn-" + v))
    attested = {(p, lang, t) for p, lang, t, _ in caps}
    key = {t: caption_key(t) for t in {t for _, _, t, _ in caps}}
    return {
        "images": images,
        "images224": images224,
        "splits": splits,
        "m30k_split": m30k_split,
        "caps": caps,
        "attested": attested,
        "key": key,
    }


# -- a real Milvus server -------------------------------------------------------------------------------------
def _bind_reusable(port: int):
    """A socket listening on loopback ``port`` (SO_REUSEADDR), or None when something else listens there."""
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        return sock
    except OSError:
        sock.close()
        return None


class MilvusProcess:
    """A Milvus standalone server (the binary the `milvus` wheel ships, a development dependency) with its embedded
    etcd and local storage in ``base``, on one free loopback port for its whole life: it can be killed (SIGKILL, a
    crash) or hung (SIGSTOP) and started again on the same port and data, so its collections persist."""

    def __init__(self, base: Path):
        import socket

        try:
            from milvus import MilvusServer
        except ImportError as exc:
            pytest.fail(f"the milvus package (a real Milvus server) is not installed ({exc}): run `make setup`")
        self.base = base
        self.server = MilvusServer()
        self.server.set_base_dir(str(base))
        # the wheel probes ports by binding without SO_REUSEADDR, which a killed server's port refuses while its
        # connections linger in TIME_WAIT; Milvus itself binds with it
        self.server.config.try_bind_port = _bind_reusable
        probes = [socket.socket() for _ in range(3)]  # held open together: three different free ports
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        self.port, client, peer = (probe.getsockname()[1] for probe in probes)
        for probe in probes:
            probe.close()
        self.server.config.configs["proxy_port"] = self.port
        self.uri = f"http://127.0.0.1:{self.port}"
        self.hung = False
        # its embedded etcd listens on etcd's fixed ports (2379, 2380) unless its own config file says otherwise: a
        # second server on the machine (another test process) would fail to start
        etcd = base / "etcd.yaml"
        etcd.write_text(
            f"name: default\nlisten-client-urls: http://127.0.0.1:{client}\n"
            f"advertise-client-urls: http://127.0.0.1:{client}\nlisten-peer-urls: http://127.0.0.1:{peer}\n"
            f"initial-advertise-peer-urls: http://127.0.0.1:{peer}\n"
            f"initial-cluster: default=http://127.0.0.1:{peer}\n"
        )
        write_config = self.server.config.write_config

        def write_config_with_etcd() -> None:
            write_config()
            path = base / "configs" / "milvus.yaml"
            text = path.read_text()
            assert "\netcd:\n" in text, f"{path} has no etcd section to give the embedded etcd's config file"
            path.write_text(text.replace("\netcd:\n", f"\netcd:\n  config:\n    path: {etcd}\n", 1))

        self.server.config.write_config = write_config_with_etcd

    @property
    def pid(self) -> int | None:
        return self.server.server_proc.pid if self.server.server_proc else None

    def start(self) -> float:
        """Start it (and wait until it answers); the seconds that took. A server that cannot start fails the test
        that asked for it, saying why (its log's tail)."""
        import time

        t0 = time.monotonic()
        try:
            self.server.start()
        except Exception as exc:  # noqa: BLE001 - the package raises TimeoutError / RuntimeError / OSError
            log = self.base / "logs" / "milvus-stderr.log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else "(no log)"
            self.server.stop()
            pytest.fail(f"the Milvus server did not start ({exc!r}); its stderr ends:\n{tail}")
        return time.monotonic() - t0

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed or closed by the server."""
        import signal

        proc = self.server.server_proc
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        self.hung = False
        self.server.stop()  # forgets the process, closes its log files

    def hang(self) -> None:
        """SIGSTOP: the port still accepts connections, nothing answers."""
        import signal

        self.server.server_proc.send_signal(signal.SIGSTOP)
        self.hung = True

    def stop(self) -> None:
        if self.hung:
            self.kill()  # a stopped process would sit out SIGTERM
        self.server.stop()


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory):
    """The URI of a Milvus standalone server (MilvusProcess) on a free loopback port, for this session."""
    server = MilvusProcess(tmp_path_factory.mktemp("milvus-server"))
    server.start()
    try:
        yield server.uri
    finally:
        server.stop()


@pytest.fixture(scope="module")
def milvus_process(tmp_path_factory):
    """A Milvus server of the module's own (its own port and data folder), started: fault tests kill, hang and
    restart it without touching the session's ``milvus_server``."""
    server = MilvusProcess(tmp_path_factory.mktemp("milvus-process"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
