"""`polyvse data fetch NAME`: put a public corpus into the data root, in the layout of its public
repository (the layout every reader expects).

Two ways:
  * from the public source (default): HTTP downloads with requests, progress bars (polyvse.util.progress);
  * from a local mirror of the same layout (`source_dir`, CLI `--from DIR`), e.g. ../shared/data:
    every file under the corpus folder of the mirror is copied.

Every file is written atomically (to a temporary file beside it, then renamed), so an interrupted run
never leaves a truncated file under its final name. Re-running is cheap: a mirror file is skipped when
the copy has the same size and modification time (or, failing that, the same sha256); a download is
skipped when the file is already there (non-empty) unless force=True.

Corpora (NAME): multi30k, flickr8k, flickr8k-224, flickr8kcn, muse, sts, multiscript30k, or "all".
  multi30k    github multi30k/dataset: task1 raw en/de/fr/cs + task2 raw 5x en/de, 2016 splits
  flickr8kcn  github li-xirong/flickr8kcn: Chinese captions (zhc/zhb/zhg/zhm), English, splits
  flickr8k    photos from github quantumnaan/sic_translator (data/Images, a ~1000-photo Flickr8K
              subset; the public mirror holds 850 of them). The captions CSVs are rebuilt from the
              Flickr8K English captions that li-xirong/flickr8kcn publishes (flickr8kenc.caption.txt):
              `all_captions.txt` for all 8091 photos (byte-identical to the mirror's file) and
              `captions.txt` for the photos downloaded.
  flickr8k-224  the whole Flickr8K photo set at 224x224 (squashed from the full frame), from github
              RlNZLER/Image-Text-Matching (data/images at the commit F224_COMMIT pins), re-saved as JPEG
              quality 90 under `<flickr_id>_<secret>.jpg` names (the mirror's format). The mirror at
              hand holds 7,941 of the 8,091 photos; a download gets every photo the repository has.
  muse        MUSE bilingual dictionaries (dl.fbaipublicfiles.com/arrival/dictionaries): full
              dictionaries into muse/full/, the official 0-5000 / 5000-6500 train/test splits into
              muse/splits/. (The mirror's muse/splits_reconstructed/ is a derived copy; it is only
              available through --from.)
  multiscript30k  github ufdatastudio/multi30k-extension: machine translations of Multi30K task1's English
              lines into es, ar, zh (Simplified), qu, gn (multi30k-dataset-en-<lang>/<split>.<lang>, stored
              gzipped as multiscript30k/en-<lang>/<split>.<lang>.gz, the layout polyvse reads)
  sts         SemEval STS: STS Benchmark, and the caption-genre test sets STS12 MSRvid, STS14 and
              STS15 images (the files the mirror keeps), from the STS wiki archives.
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests

from ..errors import DataError
from ..util.atomic import atomic_open
from ..util.progress import Progress, track
from . import flickr8kcn as _cn, multi30k as _m30k, multiscript30k as _ms30k

CORPORA = (
    "multi30k",
    "flickr8kcn",
    "flickr8k",
    "flickr8k-224",
    "muse",
    "sts",
    "multiscript30k",
)  # "all" fetches them in this order

MULTI30K_BASE = "https://raw.githubusercontent.com/multi30k/dataset/master/"
FLICKR8KCN_BASE = "https://raw.githubusercontent.com/li-xirong/flickr8kcn/master/"
SIC_REPO = "quantumnaan/sic_translator"
SIC_COMMIT = "b5393e59e3f273fa10df4fb7c8f36d8fb5cdf7e4"  # the commit that added data/Images
SIC_TREE_URL = f"https://api.github.com/repos/{SIC_REPO}/git/trees/{SIC_COMMIT}?recursive=1"
SIC_RAW_BASE = f"https://raw.githubusercontent.com/{SIC_REPO}/{SIC_COMMIT}/"
SIC_IMAGES_DIR = "data/Images/"
F224_REPO = "RlNZLER/Image-Text-Matching"
F224_COMMIT = "56a15d913c3f"  # resolved to the full sha through the API before listing the tree
F224_IMAGES_DIR = "data/images/"
F224_SIZE = (224, 224)
MUSE_BASE = "https://dl.fbaipublicfiles.com/arrival/dictionaries/"
MUSE_FULL_PAIRS = (
    "en-de",
    "de-en",
    "en-fr",
    "fr-en",
    "en-cs",
    "cs-en",
    "en-zh",
    "zh-en",
    "en-ja",
    "ja-en",
    "de-fr",
    "fr-de",
)
MUSE_SPLIT_PAIRS = ("en-de", "de-en", "en-fr", "fr-en", "en-cs", "cs-en", "en-zh", "zh-en", "en-ja", "ja-en")
MUSE_RANGES = ("0-5000", "5000-6500")
STS_WIKI = "http://ixa2.si.ehu.es/stswiki/images/"
# archive URL, folder inside the data root, {file name in the archive: file name in the data root}
STS_ARCHIVES = (
    (
        STS_WIKI + "4/48/Stsbenchmark.tar.gz",
        "sts/STSBenchmark",
        ("readme.txt", "LICENSE.txt", "sts-train.csv", "sts-dev.csv", "sts-test.csv"),
    ),
    (STS_WIKI + "4/40/STS2012-en-test.zip", "sts/STS12-en-test", ("STS.input.MSRvid.txt", "STS.gs.MSRvid.txt")),
    (STS_WIKI + "8/8c/STS2014-en-test.zip", "sts/STS14-en-test", ("STS.input.images.txt", "STS.gs.images.txt")),
    (STS_WIKI + "d/da/STS2015-en-test.zip", "sts/STS15-en-test", ("STS.input.images.txt", "STS.gs.images.txt")),
)
TIMEOUT = (15, 120)  # connect, read (seconds)
_CHUNK = 1 << 16

# Files that must be present after a fetch (relative to the data root); a mirror lacking one is refused.
REQUIRED: dict[str, list[str]] = {
    "multi30k": _m30k.relative_files(),
    "flickr8kcn": [p for p in _cn.relative_files() if not p.endswith("README.md")],
    "flickr8k": ["flickr8k/captions.txt", "flickr8k/all_captions.txt"],
    "flickr8k-224": [],  # photos only: checked by count in _check_complete
    "muse": [f"muse/full/{p}.txt" for p in ("en-de", "en-fr")],
    "sts": ["sts/STSBenchmark/sts-test.csv"],
    "multiscript30k": _ms30k.relative_files(),
}
# Folder of each corpus in the data root (what a mirror copy takes).
FOLDERS = {
    "multi30k": "multi30k",
    "flickr8kcn": "flickr8kcn",
    "flickr8k": "flickr8k",
    "flickr8k-224": "flickr8k-224",
    "muse": "muse",
    "sts": "sts",
    "multiscript30k": "multiscript30k",
}


@dataclass
class FetchResult:
    """What a fetch did: files written and files skipped as already present (paths relative to root)."""

    name: str
    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def merge(self, other: FetchResult) -> None:
        self.written += other.written
        self.skipped += other.skipped

    def summary(self) -> str:
        return f"{self.name}: {len(self.written)} file(s) written, {len(self.skipped)} already up to date"


def fetch(
    name: str,
    root: str | os.PathLike,
    source_dir: str | os.PathLike | None = None,
    progress: bool = True,
    *,
    force: bool = False,
) -> FetchResult:
    """Fetch corpus `name` ("multi30k", "flickr8k", "flickr8kcn", "muse", "sts" or "all") into the data
    root `root`, from `source_dir` (a local mirror of the same layout) or else from the public source."""
    names = list(CORPORA) if name == "all" else [name]
    for n in names:
        if n not in CORPORA:
            raise DataError(f"unknown corpus {name!r}; choose one of {', '.join(CORPORA)} or all")
    root = Path(root).expanduser()
    result = FetchResult(name)
    for n in names:
        if source_dir is not None:
            result.merge(_copy_corpus(n, Path(source_dir).expanduser(), root, progress))
        else:
            result.merge(_DOWNLOADERS[n](root, progress, force))
        _check_complete(n, root)
    return result


def _check_complete(name: str, root: Path) -> None:
    missing = [p for p in REQUIRED[name] if not (root / p).is_file()]
    if missing:
        raise DataError(
            f"{name} is incomplete after fetching: {missing[0]} is missing "
            f"({len(missing)} file(s) in all); re-run the fetch",
            root,
        )
    if name == "flickr8k-224" and not any((root / FOLDERS[name] / "images").glob("*.jpg")):
        raise DataError(
            f"{name} is incomplete after fetching: no photos in {FOLDERS[name]}/images; re-run the fetch", root
        )


# -- local mirror -------------------------------------------------------------------------------------
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _same_file(src: Path, dest: Path) -> bool:
    try:
        d = dest.stat()
    except FileNotFoundError:
        return False
    s = src.stat()
    if s.st_size != d.st_size:
        return False
    if int(s.st_mtime) == int(d.st_mtime):
        return True
    return _sha256(src) == _sha256(dest)


def _atomic_copy(src: Path, dest: Path) -> None:
    with atomic_open(dest, "wb", fsync=False) as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)
    st = src.stat()
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size + mtime = up to date on the next run


def _copy_corpus(name: str, mirror: Path, root: Path, progress: bool) -> FetchResult:
    src_dir = mirror / FOLDERS[name]
    if not src_dir.is_dir():
        raise DataError(
            f"the mirror has no {FOLDERS[name]}/ folder; --from must point at a copy of the public "
            "data layout (e.g. ../shared/data)",
            mirror,
        )
    missing = [p for p in REQUIRED[name] if not (mirror / p).is_file()]
    if missing:
        raise DataError(
            f"the mirror lacks {missing[0]} ({len(missing)} required file(s) missing); "
            "complete the mirror or fetch from the public source",
            mirror,
        )
    if mirror.resolve() == root.resolve():
        raise DataError("the mirror is the data root itself; pass a different --from or --data-root", mirror)
    files = sorted(p for p in src_dir.rglob("*") if p.is_file() and not p.name.startswith("."))
    result = FetchResult(name)
    for src in track(files, desc=f"{name}: copying", unit="file", enabled=progress):
        rel = src.relative_to(mirror).as_posix()
        dest = root / rel
        if _same_file(src, dest):
            result.skipped.append(rel)
            continue
        _atomic_copy(src, dest)
        result.written.append(rel)
    return result


# -- downloads ----------------------------------------------------------------------------------------
def _session() -> requests.Session:
    s = requests.Session()
    s.headers["User-Agent"] = "polyvse-data-fetch"
    return s


def _get(session: requests.Session, url: str, *, stream: bool = False) -> requests.Response:
    try:
        resp = session.get(url, stream=stream, timeout=TIMEOUT)
    except requests.RequestException as exc:
        raise DataError(
            f"cannot download {url} ({type(exc).__name__}: {exc}); check the network, or fetch "
            "from a local copy with --from DIR"
        ) from None
    if resp.status_code != 200:
        resp.close()
        raise DataError(
            f"cannot download {url}: HTTP {resp.status_code}; the file may have moved — fetch from a "
            "local copy with --from DIR"
        )
    return resp


def _download(session: requests.Session, url: str, dest: Path, progress: bool) -> None:
    """Stream `url` into `dest` atomically; a size different from Content-Length is an error."""
    with atomic_open(dest, "wb") as out:
        resp = _get(session, url, stream=True)
        with resp:
            length = resp.headers.get("Content-Length")
            encoded = resp.headers.get("Content-Encoding") not in (None, "", "identity")
            total = int(length) if length and length.isdigit() and not encoded else None
            written = 0
            with Progress(
                total=total, unit="B", unit_scale=True, desc=dest.name, enabled=progress, line=False
            ) as bar:  # a bar only: the corpus's "downloading" stage has the line
                try:
                    for chunk in resp.iter_content(_CHUNK):
                        if chunk:
                            out.write(chunk)
                            written += len(chunk)
                            bar.update(len(chunk))
                except requests.RequestException as exc:
                    raise DataError(f"download of {url} broke off ({type(exc).__name__}); re-run the fetch") from None
        if total is not None and written != total:
            raise DataError(f"download of {url} is incomplete ({written} of {total} bytes); re-run the fetch")


def _download_all(
    pairs: list[tuple[str, str]],
    root: Path,
    name: str,
    progress: bool,
    force: bool,
    session: requests.Session | None = None,
) -> FetchResult:
    """Download (url, relative path) pairs; skip files already present unless force."""
    session = session or _session()
    result = FetchResult(name)
    for url, rel in track(pairs, desc=f"{name}: downloading", unit="file", enabled=progress):
        dest = root / rel
        if not force and dest.is_file() and dest.stat().st_size > 0:
            result.skipped.append(rel)
            continue
        _download(session, url, dest, progress)
        result.written.append(rel)
    return result


def _fetch_multi30k(root: Path, progress: bool, force: bool) -> FetchResult:
    pairs = [(MULTI30K_BASE + rel[len("multi30k/") :], rel) for rel in _m30k.relative_files()]
    return _download_all(pairs, root, "multi30k", progress, force)


def _fetch_flickr8kcn(root: Path, progress: bool, force: bool) -> FetchResult:
    pairs = [(FLICKR8KCN_BASE + rel[len("flickr8kcn/") :], rel) for rel in _cn.relative_files()]
    return _download_all(pairs, root, "flickr8kcn", progress, force)


def _fetch_flickr8k(root: Path, progress: bool, force: bool) -> FetchResult:
    session = _session()
    result = FetchResult("flickr8k")
    # 1. the photos: list data/Images of the pinned sic_translator commit, download each .jpg
    resp = _get(session, SIC_TREE_URL)
    try:
        tree = resp.json().get("tree", [])
    except ValueError:
        raise DataError(f"unexpected answer from {SIC_TREE_URL} (not JSON); try again later") from None
    names = sorted(
        Path(e["path"]).name
        for e in tree
        if isinstance(e, dict)
        and e.get("type") == "blob"
        and str(e.get("path", "")).startswith(SIC_IMAGES_DIR)
        and str(e["path"]).lower().endswith(".jpg")
    )
    if not names:
        raise DataError(
            f"no photos listed under {SIC_IMAGES_DIR} in {SIC_REPO}@{SIC_COMMIT[:8]}; "
            "fetch from a local copy with --from DIR"
        )
    pairs = [(SIC_RAW_BASE + SIC_IMAGES_DIR + n, f"flickr8k/images/{n}") for n in names]
    result.merge(_download_all(pairs, root, "flickr8k", progress, force, session))
    # 2. the captions: rebuilt from Flickr8K-CN's copy of the English Flickr8K captions
    enc_rel = "flickr8kcn/data/" + _cn.VARIANTS["enc"][0]
    enc_path = root / enc_rel
    if force or not enc_path.is_file():
        _download(session, FLICKR8KCN_BASE + enc_rel[len("flickr8kcn/") :], enc_path, progress)
        result.written.append(enc_rel)
    rows = [(r.image, r.text) for r in _cn.parse_caption_file(enc_path, "enc") if r.image.endswith(".jpg")]
    have = {p.name for p in (root / "flickr8k" / "images").glob("*.jpg")}
    for rel, keep in (("flickr8k/all_captions.txt", None), ("flickr8k/captions.txt", have)):
        _write_captions_csv(root / rel, rows, keep)
        result.written.append(rel)
    return result


def _fetch_flickr8k_224(root: Path, progress: bool, force: bool) -> FetchResult:
    import io

    from PIL import Image

    session = _session()
    api = f"https://api.github.com/repos/{F224_REPO}"
    try:
        sha = _get(session, f"{api}/commits/{F224_COMMIT}").json()["sha"]
        tree = _get(session, f"{api}/git/trees/{sha}?recursive=1").json().get("tree", [])
    except (ValueError, KeyError):
        raise DataError(
            f"unexpected answer from the GitHub API for {F224_REPO}@{F224_COMMIT}; try again later "
            "or fetch from a local copy with --from DIR"
        ) from None
    paths = sorted(
        e["path"]
        for e in tree
        if isinstance(e, dict)
        and e.get("type") == "blob"
        and str(e.get("path", "")).startswith(F224_IMAGES_DIR)
        and str(e["path"]).lower().endswith((".jpg", ".jpeg", ".png"))
    )
    if not paths:
        raise DataError(
            f"no photos listed under {F224_IMAGES_DIR} in {F224_REPO}@{F224_COMMIT}; "
            "fetch from a local copy with --from DIR"
        )
    result = FetchResult("flickr8k-224")
    raw = f"https://raw.githubusercontent.com/{F224_REPO}/{sha}/"
    for path in track(paths, desc="flickr8k-224: downloading", unit="photo", enabled=progress):
        rel = f"flickr8k-224/images/{Path(path).stem}.jpg"
        dest = root / rel
        if dest.is_file() and dest.stat().st_size > 0 and not force:
            result.skipped.append(rel)
            continue
        data = _get(session, raw + path).content
        try:
            img = Image.open(io.BytesIO(data)).convert("RGB")
        except OSError as exc:
            raise DataError(f"{raw + path} is not a readable image ({exc}); re-run the fetch") from None
        if img.size != F224_SIZE:  # the mirror's photos are squashed to 224x224 from the full frame
            img = img.resize(F224_SIZE, Image.BICUBIC)
        with atomic_open(dest, "wb") as fh:
            img.save(fh, format="JPEG", quality=90)
        result.written.append(rel)
    return result


def _write_captions_csv(dest: Path, rows: list[tuple[str, str]], keep: set[str] | None) -> None:
    with atomic_open(dest, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["image", "caption"])
        for image, text in rows:
            if keep is None or image in keep:
                w.writerow([image, text])


def _fetch_muse(root: Path, progress: bool, force: bool) -> FetchResult:
    pairs = [(f"{MUSE_BASE}{p}.txt", f"muse/full/{p}.txt") for p in MUSE_FULL_PAIRS]
    pairs += [(f"{MUSE_BASE}{p}.{r}.txt", f"muse/splits/{p}.{r}.txt") for p in MUSE_SPLIT_PAIRS for r in MUSE_RANGES]
    return _download_all(pairs, root, "muse", progress, force)


def _fetch_sts(root: Path, progress: bool, force: bool) -> FetchResult:
    session = _session()
    result = FetchResult("sts")
    for url, folder, files in STS_ARCHIVES:
        rels = [f"{folder}/{f}" for f in files]
        if not force and all((root / r).is_file() for r in rels):
            result.skipped += rels
            continue
        with tempfile.TemporaryDirectory(dir=_mkdir(root)) as tmpdir:
            archive = Path(tmpdir) / url.rsplit("/", 1)[-1]
            _download(session, url, archive, progress)
            members = _archive_members(archive)
            for fname, rel in zip(files, rels):
                data = members.get(fname)
                if data is None:
                    raise DataError(
                        f"{archive.name} from {url} has no {fname}; the archive changed — fetch from "
                        "a local copy with --from DIR"
                    )
                with atomic_open(root / rel, "wb") as fh:
                    fh.write(data())
                result.written.append(rel)
    return result


def _mkdir(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return root


def _archive_members(archive: Path) -> dict[str, Callable[[], bytes]]:
    """base name -> reader of every regular file in a .zip / .tar.gz (first one wins)."""
    out: dict[str, Callable[[], bytes]] = {}
    try:
        if archive.suffix == ".zip":
            zf = zipfile.ZipFile(archive)
            for info in zf.infolist():
                if not info.is_dir():
                    out.setdefault(Path(info.filename).name, lambda i=info: zf.read(i))
        else:
            tf = tarfile.open(archive, "r:*")
            for m in tf.getmembers():
                if m.isfile():
                    out.setdefault(Path(m.name).name, lambda m=m: tf.extractfile(m).read())
    except (zipfile.BadZipFile, tarfile.TarError, OSError) as exc:
        raise DataError(f"downloaded archive is damaged ({exc}); re-run the fetch", archive) from None
    return out


MULTISCRIPT30K_BASE = "https://raw.githubusercontent.com/ufdatastudio/multi30k-extension/main/"


def _fetch_multiscript30k(root: Path, progress: bool, force: bool) -> FetchResult:
    """The repository keeps plain-text files; they are stored gzipped, as Multi30K's own lines."""
    import gzip

    session, result = _session(), FetchResult("multiscript30k")
    for rel in track(_ms30k.relative_files(), desc="multiscript30k: downloading", unit="file", enabled=progress):
        dest = root / rel
        if not force and dest.is_file() and dest.stat().st_size > 0:
            result.skipped.append(rel)
            continue
        folder, name = rel.split("/")[-2:]  # en-es, train.es.gz
        plain = dest.with_suffix(".download")
        _download(session, f"{MULTISCRIPT30K_BASE}multi30k-dataset-{folder}/{name[: -len('.gz')]}", plain, progress)
        with open(plain, "rb") as src, atomic_open(dest, "wb") as out:
            out.write(gzip.compress(src.read(), mtime=0))
        plain.unlink()
        result.written.append(rel)
    return result


_DOWNLOADERS: dict[str, Callable[[Path, bool, bool], FetchResult]] = {
    "multi30k": _fetch_multi30k,
    "flickr8kcn": _fetch_flickr8kcn,
    "flickr8k": _fetch_flickr8k,
    "flickr8k-224": _fetch_flickr8k_224,
    "muse": _fetch_muse,
    "sts": _fetch_sts,
    "multiscript30k": _fetch_multiscript30k,
}

__all__ = ["fetch", "FetchResult", "CORPORA"]
