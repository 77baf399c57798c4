"""Where a written result came from: one schema for every record the project writes.

Library code, importable without torch, so the application's commands (``polyvse evaluate --json``), the
trainer (a run's ``metrics.json`` and its checkpoint's ``training.json``), the zoo (``zoo_run.json``), the
benchmarks and the scripts record it alike. A record carries it under the key ``"provenance"``::

    {"schema": 1,
     "date": "2026-11-28T15:40:02+00:00",          # ISO 8601, with time and zone
     "commit": "<40 hex>",                          # the checkout that wrote it (None: not a git checkout)
     "dirty": false,                                # tracked files had uncommitted changes (None: unknown)
     "dirty_files": [],                             # which ones
     "machine": {"cpu": ..., "cores": 2, "memory_gb": 23.5, "gpu": null, "os": ..., "python": "3.11.7"},
     "command": "polyvse evaluate --checkpoint ...",  # the argv that wrote it
     "polyvse_version": "0.1.0",
     "model": {"fingerprint": "sha256:...", "photo_fingerprint": "sha256:...",
               "checkpoint": "runs/model/checkpoint", "config": "polyvse-best"}
              # or {"none": "<why no model is measured: synthetic vectors, word lists, ...>"}
    }

The fingerprints are the index's (:func:`polyvse.index.fingerprint.model_fingerprint`, every part of the model, and
:func:`~polyvse.index.fingerprint.photo_fingerprint`, what decides where a photo lands), computed here on the
checkpoint's numpy side (:func:`checkpoint_fingerprints`): they equal the manifest's of an index built with that
checkpoint. Records written before photo sides were recorded name ``fingerprint`` alone, the legacy value that left
adapted languages out (:func:`~polyvse.index.fingerprint.legacy_fingerprint`). ``tests/test_record_provenance.py``
holds every record under ``results/`` and ``benchmarks/results/`` to this schema.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = [
    "PRODUCT_BUILD_RECORD",
    "PRODUCT_CHECKPOINT",
    "PRODUCT_TRAINED_CHECKPOINT",
    "SCHEMA",
    "REPO",
    "checkpoint_fingerprint",
    "checkpoint_fingerprints",
    "checkpoint_model",
    "cpu_model",
    "git",
    "git_state",
    "index_model",
    "is_product_checkpoint",
    "machine",
    "machine_line",
    "no_model",
    "provenance",
    "provenance_problems",
]

#: version of the schema above (a reader can tell older blocks apart)
SCHEMA = 1

#: the checkout this package runs from (src/polyvse/.. /..)
REPO = Path(__file__).resolve().parents[2]

#: the record of the product model's build (`make model`, written by benchmarks/bench_make_model.py): every record of
#: the product model names the fingerprints it names (tests/test_record_provenance.py)
PRODUCT_BUILD_RECORD = "benchmarks/results/make_model.json"
#: where `make model` leaves the product checkpoint (polyvse.util.paths.MODEL_DIR), as a record's model block names it
PRODUCT_CHECKPOINT = "runs/model/checkpoint"
#: the checkpoint it was adapted from (polyvse.adaptation.plan.TRAINED): a record of it is of the same build
PRODUCT_TRAINED_CHECKPOINT = "runs/model/trained-checkpoint"


#: what a page says beside a record whose provenance block is marked ``reconstructed``
RECONSTRUCTED_MARK = "(reconstructed provenance)"


def is_product_checkpoint(checkpoint) -> bool:
    """Whether a record's ``model.checkpoint`` is the product's: ``runs/model/checkpoint`` of some checkout, or the
    trained checkpoint it was adapted from, ``runs/model/trained-checkpoint``."""
    if not isinstance(checkpoint, str):
        return False
    path = checkpoint.strip().rstrip("/")
    return any(path == p or path.endswith("/" + p) for p in (PRODUCT_CHECKPOINT, PRODUCT_TRAINED_CHECKPOINT))


def git(*args: str, cwd: str | os.PathLike = REPO) -> str | None:
    """`git ARGS` in the repository: its stripped output, None where git cannot run or fails."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state(cwd: str | os.PathLike = REPO) -> dict:
    """``{"commit", "dirty", "dirty_files"}`` of the checkout at ``cwd``: dirty when tracked files differ from HEAD,
    staged or not (untracked files do not count); all None outside a git checkout.

    A machine that got a copy of the working tree (a GPU machine), whose .git, if any, need not match it, is told
    by its caller: ``$POLYVSE_SOURCE_COMMIT`` (and ``$POLYVSE_SOURCE_DIRTY`` 0 or 1) stand for this checkout's
    state, and the result says so (``commit_from``)."""
    told = os.environ.get("POLYVSE_SOURCE_COMMIT")
    if told and Path(cwd).resolve() == REPO:
        return {
            "commit": told,
            "dirty": {"0": False, "1": True}.get(os.environ.get("POLYVSE_SOURCE_DIRTY", "")),
            "dirty_files": None,
            "commit_from": "$POLYVSE_SOURCE_COMMIT (the caller's word: a copied tree)",
        }
    commit = git("rev-parse", "HEAD", cwd=cwd)
    changed = git("diff", "--name-only", "HEAD", "--", cwd=cwd) if commit else None  # staged or not
    if changed is None:
        return {"commit": commit or None, "dirty": None, "dirty_files": None}
    files = [line for line in changed.splitlines() if line.strip()]
    return {"commit": commit, "dirty": bool(files), "dirty_files": files}


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _gpu() -> str | None:
    """The first GPU's name: torch's when torch is already loaded (no import for it), else nvidia-smi's."""
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    if shutil.which("nvidia-smi"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
            names = [x.strip() for x in out.stdout.splitlines() if x.strip()]
            return names[0] if out.returncode == 0 and names else None
    return None


def machine() -> dict:
    """This machine: CPU model, cores, memory, GPU (None: none), OS, Python."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "gpu": _gpu(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def machine_line(m: dict | None = None) -> str:
    """One line for a page: cores, CPU, memory, GPU, OS, Python (of :func:`machine`'s dict)."""
    m = m or machine()
    mem = f", {m['memory_gb']:.0f} GB RAM" if m.get("memory_gb") else ""
    gpu = f", GPU: {m['gpu']}" if m.get("gpu") else ", no GPU"
    return f"{m['cores']} CPU cores ({m['cpu']}){mem}{gpu}; {m['os']}, Python {m['python']}"


def checkpoint_fingerprints(path: str | os.PathLike) -> dict:
    """``{"fingerprint", "photo_fingerprint"}`` of a checkpoint folder, read on its numpy side (no torch): the
    values of ``model_fingerprint`` / ``photo_fingerprint`` of ``polyvse.load(path)``, which an index built with it
    records in its manifest's ``model`` section."""
    from .index.fingerprint import model_fingerprint, photo_fingerprint

    weights = _fingerprint_view(path)
    return {"fingerprint": model_fingerprint(weights), "photo_fingerprint": photo_fingerprint(weights)}


def checkpoint_fingerprint(path: str | os.PathLike) -> str:
    """The model fingerprint of a checkpoint folder (every part, adapted languages included), read on its numpy side
    (no torch): the same value as ``model_fingerprint(polyvse.load(path))`` and as the manifest's ``model.fingerprint``
    of an index built with it."""
    from .index.fingerprint import model_fingerprint

    return model_fingerprint(_fingerprint_view(path))


def _fingerprint_view(path: str | os.PathLike):
    from .model.checkpoint import read_checkpoint_config
    from .model.numpy_serving.text_query import NumpyQueryModel

    class Weights(NumpyQueryModel):  # the checkpoint's config and weights: all the fingerprints read
        def encode_text(self, texts, lang):
            raise NotImplementedError("a fingerprint's view of the checkpoint encodes nothing")

    ck = read_checkpoint_config(path)
    return Weights(ck, Weights.read_weights(ck))


def checkpoint_model(
    path: str | os.PathLike,
    config: str | None = None,
    fingerprint: str | None = None,
    photo_fingerprint: str | None = None,
) -> dict:
    """The ``model`` block of a record that measured the checkpoint at ``path``: both fingerprints (the model's and
    its photo side's), the path and ``config``, the training config's name (default: the checkpoint's
    training.json); ``fingerprint`` / ``photo_fingerprint`` when the caller has them already."""
    path = Path(path)
    if fingerprint is None or photo_fingerprint is None:
        from .index import fingerprint as fp

        weights = _fingerprint_view(path)  # only what is missing is hashed
        fingerprint = fingerprint or fp.model_fingerprint(weights)
        photo_fingerprint = photo_fingerprint or fp.photo_fingerprint(weights)
    return {
        "fingerprint": fingerprint,
        "photo_fingerprint": photo_fingerprint,
        "checkpoint": str(path),
        "config": config or _config_name(path),
    }


def _config_name(checkpoint: str | os.PathLike | None) -> str | None:
    """The training config's name in a checkpoint's training.json, None where it cannot be read."""
    import json

    with contextlib.suppress(OSError, ValueError, AttributeError, KeyError, TypeError):
        return json.loads((Path(checkpoint) / "training.json").read_text(encoding="utf-8"))["config"]["name"]
    return None


def index_model(index: str | os.PathLike, checkpoint: str | os.PathLike | None = None) -> dict:
    """The ``model`` block of a record that measured searches of an index: the model that answered them (``checkpoint``,
    else the one the manifest names), both its fingerprints, and ``index_fingerprint``, the model fingerprint the index
    was built with (a checkpoint that only added languages answers with a fingerprint of its own). Where that
    checkpoint cannot be read, the manifest's fingerprints stand for it."""
    import json

    m = json.loads((Path(index) / "manifest.json").read_text(encoding="utf-8"))["model"]
    path = str(checkpoint) if checkpoint else m.get("checkpoint")
    built = {
        "fingerprint": m["fingerprint"],
        **({"photo_fingerprint": m["photo_fingerprint"]} if m.get("photo_fingerprint") else {}),
        "checkpoint": path,
        "config": _config_name(path) if path else None,
    }
    if path and Path(path).is_dir():
        # whatever is wrong with the checkpoint, the measurement the record carries is not lost for it
        with contextlib.suppress(Exception):
            built = checkpoint_model(path)
    return {**built, "index": str(index), "index_fingerprint": m["fingerprint"]}


def no_model(why: str) -> dict:
    """The ``model`` block of a record that measures no trained model, saying why (synthetic vectors, ...)."""
    if not why or not why.strip():
        raise ValueError("no_model: say why no model is measured")
    return {"none": why}


def _command(command: str | list | tuple | None) -> str:
    if command is None:
        argv = list(sys.argv)
        if argv and Path(argv[0]).is_absolute() and Path(argv[0]).resolve().is_relative_to(REPO):
            argv[0] = Path(argv[0]).resolve().relative_to(REPO).as_posix()  # a script of the checkout: relative
        if argv and argv[0].endswith(".py"):
            argv.insert(0, "python")  # `python script.py`: sys.argv starts at the script
        return shlex.join(argv)
    return command if isinstance(command, str) else shlex.join(str(x) for x in command)


def _version() -> str:
    from ._version import __version__

    return __version__


def provenance(
    command: str | list | tuple | None = None,
    model: dict | str | os.PathLike | None = None,
    *,
    tree: dict | None = None,
    cwd: str | os.PathLike = REPO,
) -> dict:
    """The provenance block of a record (module docstring).

    ``command``: what wrote it (a string or an argv; default this process's ``sys.argv``). ``model``: a model block
    (:func:`checkpoint_model`, :func:`no_model`), or a checkpoint folder's path (its block is computed); None leaves
    ``{"none": None}``, which the records' test rejects: a writer must say what it measured. ``tree``: the
    :func:`git_state` to record instead of the current one (a long run names the checkout it started on).
    """
    if isinstance(model, (str, os.PathLike)):
        model = checkpoint_model(model)
    state = dict(tree) if tree is not None else git_state(cwd)
    return {
        "schema": SCHEMA,
        "date": _dt.datetime.now(_dt.UTC).astimezone().isoformat(timespec="seconds"),
        "commit": state.get("commit"),
        "dirty": state.get("dirty"),
        "dirty_files": state.get("dirty_files"),
        **({"commit_from": state["commit_from"]} if state.get("commit_from") else {}),
        "machine": machine(),
        "command": _command(command),
        "polyvse_version": _version(),
        "model": model if model is not None else {"none": None},
    }


#: fields a block reconstructed after the fact may leave None, each with its reason in ``reconstructed.unknown``
#: (machine.gpu None with a reason: not recorded; without one: no GPU)
RECONSTRUCTED_MAY_BE_UNKNOWN = (
    "dirty",
    "command",
    "model.fingerprint",
    "machine.cpu",
    "machine.cores",
    "machine.memory_gb",
    "machine.gpu",
    "machine.os",
    "machine.python",
)


def provenance_problems(block) -> list[str]:
    """What a provenance block lacks against the schema (empty: complete). None is accepted only inside a block
    marked ``reconstructed`` (``{"from": [sources], "by": "<script>", "unknown": {field: why}}``, written after
    the fact from a record's own files and git) and only for :data:`RECONSTRUCTED_MAY_BE_UNKNOWN`, each with a
    reason."""
    if not isinstance(block, dict):
        return ["no provenance block"]
    c = _BlockCheck(block)
    c.check("schema", lambda v: v == SCHEMA, f"schema version {SCHEMA}")
    c.check("date", _iso_with_zone, "ISO 8601 date with time and zone")
    c.check("commit", lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{40}", v), "a full commit hash")
    c.check("dirty", lambda v: isinstance(v, bool), "true or false")
    c.check("command", _text, "the command that wrote it")
    c.check("polyvse_version", _text, "the polyvse version")
    _check_machine(c)
    _check_model(c)
    return c.out


def _iso_with_zone(v) -> bool:
    try:
        d = _dt.datetime.fromisoformat(v)
    except (TypeError, ValueError):
        return False
    return "T" in v and d.tzinfo is not None


def _text(v) -> bool:
    return isinstance(v, str) and bool(v.strip())


class _BlockCheck:
    """The problems found so far in one provenance block (``out``), and the rule for a None field: allowed only
    in a well-formed ``reconstructed`` block, for a field that may be unknown, with a reason."""

    def __init__(self, block: dict):
        self.block, self.out, self.unknown = block, [], {}
        self.rebuilt = rebuilt = block.get("reconstructed")
        if rebuilt is not None:
            if not (
                isinstance(rebuilt, dict)
                and isinstance(rebuilt.get("from"), list)
                and rebuilt["from"]
                and all(isinstance(x, str) and x for x in rebuilt["from"])
                and isinstance(rebuilt.get("by"), str)
                and rebuilt["by"]
            ):
                self.out.append("reconstructed: needs 'from' (its sources) and 'by' (the script that wrote it)")
            else:
                self.unknown = rebuilt.get("unknown") or {}

    def value(self, path: str):
        v = self.block
        for part in path.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        return v

    def allowed_none(self, path: str) -> bool:
        if path in RECONSTRUCTED_MAY_BE_UNKNOWN and self.rebuilt is not None:
            why = self.unknown.get(path)
            if isinstance(why, str) and why.strip():
                return True
            self.out.append(f"{path}: None without a reason in reconstructed.unknown")
            return True
        return False

    def check(self, path: str, ok, what: str) -> None:
        v = self.value(path)
        if v is None and self.allowed_none(path):
            return
        if v is None or not ok(v):
            self.out.append(f"{path}: {what} (found {v!r})")


def _check_machine(c: _BlockCheck) -> None:
    machine = c.block.get("machine")
    if not isinstance(machine, dict):
        c.out.append("machine: a dict (cpu, cores, memory_gb, gpu, os, python)")
        return
    c.check("machine.cpu", _text, "the CPU model")
    c.check("machine.cores", lambda v: isinstance(v, int) and v > 0, "cores, a positive int")
    c.check("machine.memory_gb", lambda v: isinstance(v, (int, float)) and v > 0, "memory in GB")
    if "gpu" not in machine or not (machine["gpu"] is None or _text(machine["gpu"])):
        c.out.append("machine.gpu: the GPU's name, or None for none")
    c.check("machine.os", _text, "the OS")
    c.check("machine.python", _text, "the Python version")


def _check_model(c: _BlockCheck) -> None:
    model = c.block.get("model")
    if not isinstance(model, dict):
        c.out.append("model: a dict ({fingerprint, checkpoint, config} or {none: why})")
    elif "none" in model:
        if not _text(model["none"]):
            c.out.append("model.none: say why no model is measured")
    else:
        c.check("model.fingerprint", lambda v: isinstance(v, str) and v.startswith("sha256:"), "sha256:<hex>")
        if model.get("photo_fingerprint") is not None:  # absent from records older than recorded photo sides
            c.check("model.photo_fingerprint", lambda v: isinstance(v, str) and v.startswith("sha256:"), "sha256:<hex>")
        c.check("model.checkpoint", _text, "the checkpoint's path")
        c.check("model.config", _text, "the training config's name")
