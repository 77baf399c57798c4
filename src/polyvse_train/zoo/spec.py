"""What a zoo run trains: the spec file (budget + list of runs), the planned runs and their effective configs.

The spec (``configs/zoo/*.yaml``) holds TrainConfig overrides applied to every config (and per objective), so
that every method gets the same width and training budget, and the list of runs: folds, seeds (and extra seeds
for named configs), learning-curve points, and the configs trained at their own file's settings instead of the
budget (``own_settings``: a reference model whose numbers must match the ones reported elsewhere).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from polyvse.errors import DataError

from ..config import TrainConfig, changed_fields

OFFICIAL = "official"
# the make target that runs each committed spec (named in the reports it writes)
MAKE_TARGETS = {"configs/zoo/cpu.yaml": "make zoo", "configs/zoo/f8k-full.yaml": "make zoo-f8k-full"}


@dataclass
class ZooRun:
    """One training run of the zoo."""

    config: str  # config name (file stem, or the own_settings key)
    path: Path  # config file
    split: str  # "official" or "fold<i>of<k>"
    seed: int = 0
    overrides: dict[str, Any] = field(default_factory=dict)  # on top of the profile (learning-curve points)
    tag: str = ""  # distinguishes learning-curve points

    @property
    def run_id(self) -> str:
        return f"{self.config}/{self.split}-s{self.seed}" + (f"-{self.tag}" if self.tag else "")


@dataclass
class ZooSpec:
    """What a zoo run trains: the budget profile applied to every config and the list of runs."""

    overrides: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields set for every config
    by_objective: dict[str, dict[str, Any]] = field(default_factory=dict)  # ... and per objective, on top
    folds: int = 5
    official: bool = True
    tasks: bool = True  # the text-only tasks (tasks.json) on the official split's runs
    seeds: list[int] = field(default_factory=lambda: [0])
    extra_seeds: dict[str, list[int]] = field(default_factory=dict)  # config -> more seeds (official split)
    configs: list[str] = field(default_factory=list)  # [] = every config in the config folder
    own_settings: dict[str, str] = field(default_factory=dict)  # name -> config file run without the budget
    curve_configs: list[str] = field(default_factory=list)  # Translator learning curve
    curve_lang: str = ""
    curve_sizes: list[int] = field(default_factory=list)
    out: str = "runs/zoo"  # run folders (the CLI's --out overrides)
    title: str = ""  # the report's name for this zoo; "" = the F8K-ML zoo, which writes all of results.md

    def profile_for(self, objective: str) -> dict[str, Any]:
        return {**self.overrides, **self.by_objective.get(objective, {})}

    def profile_of(self, config: str, objective: str) -> dict[str, Any]:
        """The budget applied to a config: none for the configs trained at their own settings."""
        return {} if config in self.own_settings else self.profile_for(objective)


def load_spec(path: str | Path | None) -> ZooSpec:
    """A ZooSpec from YAML; unknown keys and TrainConfig fields that do not exist are errors naming the file."""
    if path is None:
        return ZooSpec()
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"cannot read the zoo spec: {exc}", path) from exc
    known = set(ZooSpec.__dataclass_fields__)
    if not isinstance(data, dict) or set(data) - known:
        raise DataError(
            f"a zoo spec is a mapping with keys {', '.join(sorted(known))}; unknown: "
            f"{', '.join(sorted(set(data) - known)) if isinstance(data, dict) else data!r}",
            path,
        )
    spec = ZooSpec(**data)
    base = TrainConfig().to_dict()
    for where, extra in [
        ("overrides", spec.overrides),
        *((f"by_objective.{k}", v) for k, v in spec.by_objective.items()),
    ]:
        if not isinstance(extra, dict):
            raise DataError(f"{where} must be a mapping of TrainConfig field: value", path)
        TrainConfig.from_dict({**base, **extra}, source=f"{path} ({where})")  # type-checks every field
    for where, mapping in (("extra_seeds", spec.extra_seeds), ("own_settings", spec.own_settings)):
        if not isinstance(mapping, dict):
            raise DataError(f"{where} must be a mapping of config name: value", path)
    return spec


def effective_config(run: ZooRun, spec: ZooSpec) -> TrainConfig:
    """The run's config: its file, the spec's budget (unless the config runs at its own settings), the run's
    overrides, split and seed; the official split is evaluated on its test photos."""
    cfg = TrainConfig.load(run.path)
    data = {
        **cfg.to_dict(),
        **spec.profile_of(run.config, cfg.objective.name),
        **run.overrides,
        "split": run.split,
        "seed": run.seed,
    }
    if run.split == OFFICIAL:
        data["eval_split"] = "test"
    return TrainConfig.from_dict(data, source=str(run.path))


def config_digest(cfg: TrainConfig | dict) -> str:
    """Digest of the fields that differ from TrainConfig's defaults: a field added to TrainConfig later (with a
    default that keeps the old behaviour) does not turn finished runs stale. Runs recorded before that are
    compared the same way, from the config saved beside them."""
    changed = changed_fields(cfg.to_dict() if isinstance(cfg, TrainConfig) else cfg)
    return hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:16]


def find_configs(
    config_dir: Path, names: Iterable[str] | None = None, own_settings: dict[str, str] | None = None
) -> list[tuple[str, Path]]:
    """(name, path) of the zoo configs: every ``*.yaml`` directly in config_dir, or the named ones. A name in
    ``own_settings`` takes its file from there (replacing the folder's config of that name, or adding one)."""
    available = {p.stem: p for p in sorted(Path(config_dir).glob("*.yaml"))}
    if not available:
        raise DataError("no *.yaml configs found", config_dir)
    for name, file in (own_settings or {}).items():
        if not Path(file).is_file():
            raise DataError(f"own_settings {name!r}: no config file {file}", config_dir)
        available[name] = Path(file)
    if not names:
        return list(available.items())
    missing = [n for n in names if n not in available]
    if missing:
        raise DataError(f"unknown config(s) {', '.join(missing)}; available: {', '.join(available)}", config_dir)
    return [(n, available[n]) for n in names]


def _curve_runs(paths: dict[str, Path], spec: ZooSpec, known: set[str]) -> list[ZooRun]:
    """The learning-curve points: ``caption_limit`` = {curve_lang: n} for each n, official split, of the curve
    configs among ``paths`` (a plan of some configs only has the curves of those); a curve config that is not
    among ``known`` (every config there is) is an error."""
    curve = []
    for name in spec.curve_configs:
        if name not in known:
            raise DataError(f"learning-curve config {name!r} is not among the zoo configs")
        if name not in paths:
            continue
        for n in spec.curve_sizes:
            curve.append(
                ZooRun(
                    name,
                    paths[name],
                    OFFICIAL,
                    spec.seeds[0],
                    {"caption_limit": {spec.curve_lang: int(n)}},
                    tag=f"{spec.curve_lang}{int(n)}",
                )
            )
    return curve


def plan_runs(configs: Sequence[tuple[str, Path]], spec: ZooSpec, known: Iterable[str] | None = None) -> list[ZooRun]:
    """The official split first, then the extra seeds of named configs (official split), then the
    learning-curve points, then the folds split-major (fold0, fold1, ...): a partial zoo fills every table and
    plot of the report first, and has every config on the same folds. ``known``: every config name there is
    (default: those of ``configs``), against which ``extra_seeds`` and ``curve_configs`` are checked; a plan of
    some configs only (--configs) takes the extra seeds and learning curves of those."""
    paths = dict(configs)
    known = set(known if known is not None else paths)
    unknown = sorted(set(spec.extra_seeds) - known)
    if unknown:
        raise DataError(f"extra_seeds names config(s) that are not among the zoo configs: {', '.join(unknown)}")

    def on(split):
        return [ZooRun(name, path, split, seed) for seed in spec.seeds for name, path in configs]

    more = sorted({s for seeds in spec.extra_seeds.values() for s in seeds} - set(spec.seeds))
    extra = [
        ZooRun(name, paths[name], OFFICIAL, seed)
        for seed in more
        for name in paths
        if seed in spec.extra_seeds.get(name, [])
    ]
    folds = [r for i in range(spec.folds) for r in on(f"fold{i}of{spec.folds}")]
    return (on(OFFICIAL) + extra if spec.official else []) + _curve_runs(paths, spec, known) + folds


def run_dir(out: Path, run: ZooRun) -> Path:
    return Path(out) / run.run_id
