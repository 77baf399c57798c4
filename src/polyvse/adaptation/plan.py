"""An adaptation plan and its stage: teach a trained model the languages of a plan (``pivot``, ``languages: [{lang,
method, lines?, chosen?}]``; the product's: ``polyvse_train/configs/adapt/product.yaml``) from MultiScript30k's
lines, one checkpoint holding them all, left where users and the index expect the model (``<model>/checkpoint``).
`polyvse model build` runs it after the training and the index.

For each language of the plan, in order, what these commands do (the log prints them)::

    polyvse data parallel --lang L --pivot en --out <model>/adapt/L-en.tsv    (every evaluation photo and
                                                                              sentence left out)
    polyvse adapt --checkpoint <previous step> --lang L --parallel <model>/adapt/L-en.tsv \\
        --out <model>/adapt/<i>-L --method teacher [--subwords | --no-subwords] --resume

the first step reading the trained checkpoint, each next one the previous step's (a language listed as
``zero-shot`` is not taught: the zero-shot fallback serves it). Then the last step becomes ``<model>/checkpoint``
and the trained one is kept as ``<model>/trained-checkpoint``; the photo index ``<model>/index`` must accept the
result (its own check, ``polyvse.index.check_index_accepts``: adaptation moves no photo), which is checked before
the swap.

Resumable and atomic: a parallel file and a step's checkpoint are written atomically, a finished step (its
``<i>-L.step.json`` naming the trained checkpoint and the plan up to it) is not redone, a stopped teacher resumes
from its state file, and the swap is two renames of complete folders (a stop between them leaves the trained
checkpoint in ``trained-checkpoint``, and the next run finishes the swap). The stage's record,
``<model>/adapted.json``, is written last: per language its parallel file, the adaptation's record and seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import CheckpointError, DataError
from ..util.atomic import write_json_atomic

#: how a plan teaches a language (teacher+subwords: `polyvse adapt --method teacher --subwords`)
PLAN_METHODS = ("teacher+subwords", "teacher", "procrustes", "rcsls", "zero-shot")
TRAINED, ADAPTED, RECORD = "trained-checkpoint", "checkpoint", "adapted.json"


@dataclass(frozen=True)
class Entry:
    lang: str
    method: str
    lines: int | None = None
    chosen: str | None = None

    def as_dict(self) -> dict:
        return {"lang": self.lang, "method": self.method, "lines": self.lines, "chosen": self.chosen}


@dataclass(frozen=True)
class Plan:
    pivot: str
    entries: tuple[Entry, ...]

    @property
    def taught(self) -> list[Entry]:
        return [e for e in self.entries if e.method != "zero-shot"]


def read_plan(path: str | os.PathLike) -> Plan:
    """The plan in ``path`` (YAML: ``pivot``, ``languages: [{lang, method, lines?, chosen?}]``), or a DataError
    naming the file and what is wrong."""
    import yaml

    from ..languages import check_language
    from .multiscript_lines import PIVOT_SOURCES

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise DataError(f"cannot read the adaptation plan: {err}", path) from err
    if not isinstance(raw, dict) or not isinstance(raw.get("languages"), list) or not raw["languages"]:
        raise DataError("the adaptation plan needs 'languages': a list of {lang, method}", path)
    pivot = raw.get("pivot", "en")
    if pivot not in PIVOT_SOURCES:
        raise DataError(f"pivot {pivot!r}: MultiScript30k lines pair with Multi30K's {', '.join(PIVOT_SOURCES)}", path)
    entries, seen = [], set()
    for i, item in enumerate(raw["languages"], 1):
        where = f"languages[{i}]"
        if (
            not isinstance(item, dict)
            or not {"lang", "method"} <= set(item)
            or set(item) - {"lang", "method", "lines", "chosen"}
        ):
            raise DataError(f"{where}: expected lang, method and optionally lines, chosen; got {item!r}", path)
        lang = check_language(item["lang"], where)
        if lang in seen:
            raise DataError(f"{where}: {lang} is listed twice", path)
        if item["method"] not in PLAN_METHODS:
            raise DataError(f"{where}: method {item['method']!r}: choose one of {', '.join(PLAN_METHODS)}", path)
        lines = item.get("lines")
        if lines is not None and (not isinstance(lines, int) or isinstance(lines, bool) or lines < 1):
            raise DataError(f"{where}: lines must be a positive whole number, got {lines!r}", path)
        seen.add(lang)
        entries.append(Entry(lang, item["method"], lines, item.get("chosen")))
    return Plan(pivot, tuple(entries))


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:20]


def checkpoint_identity(folder: Path) -> str:
    """A digest of a checkpoint folder's files (names and bytes): which trained checkpoint a step started from."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        h.update(path.name.encode("utf-8") + b"\0")
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:20]


def adapt_command(entry: Entry, source: Path, pairs: Path, out: Path) -> list[str]:
    """The `polyvse adapt` command line a step runs."""
    method = "teacher" if entry.method == "teacher+subwords" else entry.method
    return (
        [
            "polyvse",
            "adapt",
            "--checkpoint",
            str(source),
            "--lang",
            entry.lang,
            "--parallel",
            str(pairs),
            "--out",
            str(out),
            "--method",
            method,
        ]
        + (["--subwords" if entry.method == "teacher+subwords" else "--no-subwords"] if method == "teacher" else [])
        + (["--lines", str(entry.lines)] if entry.lines else [])
        + ["--resume", "--quiet"]
    )


def trained_checkpoint(model: Path) -> Path:
    """The trained checkpoint of a model folder: ``trained-checkpoint`` once moved aside, else ``checkpoint``
    (which must then be a trained one, not an adapted model of unknown origin)."""
    model = Path(model)
    kept, current = model / TRAINED, model / ADAPTED
    if (kept / "config.json").is_file():
        return kept
    if not (current / "config.json").is_file():
        raise DataError(
            f"no trained checkpoint in {model} (neither {TRAINED}/ nor {ADAPTED}/): run the "
            "training first (`polyvse model build`)",
            model,
        )
    config = json.loads((current / "config.json").read_text(encoding="utf-8"))
    if config.get("adapted_languages"):
        raise CheckpointError(
            f"{current} already holds adapted languages "
            f"({', '.join(config['adapted_languages'])}) and {model / TRAINED} is missing: "
            "the stage starts from the trained checkpoint; put it back as "
            f"{current} (or retrain) and run again"
        )
    return current


class Stage:
    """The stage on one model folder (``<model>/checkpoint``, ``<model>/index``; work in ``<model>/adapt``)."""

    def __init__(self, model: Path, plan: Plan, data_root: str | None = None, report=print, progress: bool = False):
        self.model, self.plan, self.report, self.progress = Path(model), plan, report, progress
        self.work = self.model / "adapt"
        self.data_root = data_root

    # -- where things are ----------------------------------------------------------------------------------
    def trained_checkpoint(self) -> Path:
        return trained_checkpoint(self.model)

    def step_folder(self, i: int, entry: Entry) -> Path:
        return self.work / f"{i}-{entry.lang}"

    def _stamp(self, folder: Path) -> Path:
        return folder.with_name(folder.name + ".step.json")

    # -- the steps -----------------------------------------------------------------------------------------
    def parallel_file(self, entry: Entry) -> tuple[Path, dict | None]:
        """``<work>/<lang>-<pivot>.tsv`` (written once, atomically): every usable pair, evaluations left out."""
        from ..util.paths import data_root
        from .multiscript_lines import write_multiscript_parallel

        path = self.work / f"{entry.lang}-{self.plan.pivot}.tsv"
        if path.is_file():
            return path, None
        self.report(f"$ polyvse data parallel --lang {entry.lang} --pivot {self.plan.pivot} --out {path}")
        return path, write_multiscript_parallel(data_root(self.data_root), entry.lang, path, self.plan.pivot)

    def run(self) -> dict:
        """Teach every language of the plan, swap the result in, write and return the stage's record."""
        t0 = time.perf_counter()
        taught = self.plan.taught
        if not taught:
            raise DataError("the plan teaches no language (every one is zero-shot): nothing to adapt")
        trained = self.trained_checkpoint()
        identity = checkpoint_identity(trained)
        plan_key = self._plan_key(identity)
        finished = self.up_to_date(plan_key)
        if finished is not None:
            self.report(f"{self.model / ADAPTED}: adapted by this plan already ({self.model / RECORD})")
            return finished
        self.work.mkdir(parents=True, exist_ok=True)
        keys = [
            _digest(identity, self.plan.pivot, [e.as_dict() for e in taught[:i]]) for i in range(1, len(taught) + 1)
        ]
        outs = [self.step_folder(i, e) for i, e in enumerate(taught, 1)]
        done = next((i + 1 for i in reversed(range(len(taught))) if self.finished(outs[i], keys[i])), 0)
        languages = {e.lang: self.done_before(outs[i], keys[i], e) for i, e in enumerate(taught[:done])}
        for out in outs[: max(done - 1, 0)]:  # folded into a later finished step before a stop
            shutil.rmtree(out, ignore_errors=True)
        source = outs[done - 1] if done else trained
        for i in range(done, len(taught)):
            languages[taught[i].lang] = self.step(taught[i], source, outs[i], keys[i])
            if source != trained:  # the previous step is folded into this one
                shutil.rmtree(source, ignore_errors=True)
            source = outs[i]
        for entry in self.plan.entries:
            if entry.method == "zero-shot":
                languages[entry.lang] = {"method": "zero-shot", "chosen": entry.chosen}
        if source.exists():  # not swapped in yet
            fingerprint = self.check_index(source)
            self.swap(source)
        else:
            fingerprint = self.check_index(self.model / ADAPTED)
        record = self.record(trained, fingerprint, languages, time.perf_counter() - t0)
        record.update(key=plan_key, checkpoint_identity=checkpoint_identity(self.model / ADAPTED))
        write_json_atomic(self.model / RECORD, record)
        for out in outs:
            self._stamp(out).unlink(missing_ok=True)
        self.report(
            f"adapted {', '.join(e.lang for e in taught)}: {self.model / ADAPTED} "
            f"({record['seconds']:.0f} s); the trained checkpoint is in {self.model / TRAINED}"
        )
        return record

    def _plan_key(self, identity: str) -> str:
        return _digest(identity, self.plan.pivot, [e.as_dict() for e in self.plan.entries])

    def finished_record(self) -> dict | None:
        """The stage's record when there is nothing left to do: ``<model>/checkpoint`` is what this plan made of
        the trained checkpoint."""
        return self.up_to_date(self._plan_key(checkpoint_identity(self.trained_checkpoint())))

    def up_to_date(self, plan_key: str) -> dict | None:
        """The stage's record when ``<model>/checkpoint`` is what this plan made of this trained checkpoint."""
        path, current = self.model / RECORD, self.model / ADAPTED
        if not path.is_file() or not (current / "config.json").is_file():
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("key") != plan_key or record.get("checkpoint_identity") != checkpoint_identity(current):
            return None
        return record

    def _read_stamp(self, out: Path, key: str) -> dict | None:
        stamp = self._stamp(out)
        if not stamp.is_file():
            return None
        done = json.loads(stamp.read_text(encoding="utf-8"))
        return done if done.get("key") == key else None

    def finished(self, out: Path, key: str) -> bool:
        """Whether the step into ``out`` finished under ``key``: its stamp and its checkpoint there, or (the last
        step, once swapped in) at ``<model>/checkpoint``."""
        done = self._read_stamp(out, key)
        if done is None:
            return False
        if (out / "config.json").is_file():
            return True
        current = self.model / ADAPTED
        return (current / "config.json").is_file() and checkpoint_identity(current) == done["checkpoint"]

    def done_before(self, out: Path, key: str, entry: Entry) -> dict:
        self.report(f"{entry.lang}: done before ({out})")
        return self._read_stamp(out, key)["language"]

    def step(self, entry: Entry, source: Path, out: Path, key: str) -> dict:
        """One language: its parallel file, then `polyvse adapt` from ``source`` into ``out``; its stamp says it
        finished (the plan up to it, from which trained checkpoint, and the checkpoint it wrote)."""
        if out.exists():  # a step of another plan or another trained checkpoint (a stopped teacher resumes)
            if (out / "config.json").is_file():
                shutil.rmtree(out)
        t0 = time.perf_counter()
        pairs, written = self.parallel_file(entry)
        t1 = time.perf_counter()
        command = adapt_command(entry, source, pairs, out)
        self.report("$ " + " ".join(command))
        record = self._adapt(entry, source, pairs, out)
        seconds = time.perf_counter() - t0
        self.report(f"adapted {entry.lang}: {entry.method}, {record['lines']:,} lines, {seconds:.1f} s")
        language = {
            "method": entry.method,
            "chosen": entry.chosen,
            "command": " ".join(command),
            "parallel_file": written or {"file": str(pairs)},
            "adaptation": record,
            "seconds": {"parallel_file": round(t1 - t0, 1), "adapt": round(time.perf_counter() - t1, 1)},
        }
        write_json_atomic(self._stamp(out), {"key": key, "checkpoint": checkpoint_identity(out), "language": language})
        return language

    def _adapt(self, entry: Entry, source: Path, pairs: Path, out: Path) -> dict:
        from ..modules.pretrained.cache import sentence_cache_dir
        from .adapt import AdaptRequest, adapt_language
        from .options import TeacherSettings

        method = "teacher" if entry.method == "teacher+subwords" else entry.method
        teacher = TeacherSettings(subwords=entry.method == "teacher+subwords" if method == "teacher" else False)
        return adapt_language(
            AdaptRequest(
                checkpoint=source,
                lang=entry.lang,
                parallel=pairs,
                out=out,
                method=method,
                pivot_lang=self.plan.pivot,
                lines=entry.lines,
                teacher=teacher,
                resume=True,
                cache_dir=sentence_cache_dir(self.data_root),
                progress=self.progress,
            ),
            report=self.report,
        )

    # -- the result ----------------------------------------------------------------------------------------
    def check_index(self, adapted: Path) -> str:
        """The adapted checkpoint's fingerprint, once ``<model>/index`` (when there is one) accepts the checkpoint by
        the index's own check: else a CheckpointError, before anything is swapped."""
        from ..index import IndexMismatchError, check_index_accepts
        from ..model.loading import load
        from ..provenance import checkpoint_fingerprint

        index = self.model / "index"
        if (index / "manifest.json").is_file():
            try:
                check_index_accepts(index, load(adapted, device="cpu"))
            except IndexMismatchError as err:
                raise CheckpointError(
                    f"the index {index} refuses the adapted checkpoint {adapted}: {err}. Adaptation "
                    "must leave every photo as trained; nothing was swapped"
                ) from err
        return checkpoint_fingerprint(adapted)

    def swap(self, adapted: Path) -> None:
        """``adapted`` becomes ``<model>/checkpoint``, the trained checkpoint ``<model>/trained-checkpoint`` (each
        a rename of a complete folder)."""
        current, kept = self.model / ADAPTED, self.model / TRAINED
        if not (kept / "config.json").is_file():
            os.replace(current, kept)  # the trained checkpoint, kept as it was
        elif current.exists():  # an earlier adapted checkpoint (another plan): replaced
            old = self.model / f".{ADAPTED}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(current, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(adapted, current)

    def record(self, trained: Path, fingerprint: str | None, languages: dict, seconds: float) -> dict:
        from ..provenance import checkpoint_model, provenance

        return {
            "model": str(self.model / ADAPTED),
            "trained_checkpoint": str(self.model / TRAINED),
            "pivot": self.plan.pivot,
            "languages": languages,
            "adapt_seconds": round(
                sum(
                    x["seconds"]["adapt"] + x["seconds"]["parallel_file"] for x in languages.values() if "seconds" in x
                ),
                1,
            ),
            "seconds": round(seconds, 1),
            "provenance": provenance(model=checkpoint_model(self.model / ADAPTED, fingerprint=fingerprint)),
        }
