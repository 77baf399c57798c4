"""TrainConfig: a training run's configuration, its sections (polyvse_train.config.schema, .objective) built from
the normalised form (polyvse_train.config.loading), checked, and written back in the sectioned and the flat form."""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyvse.errors import DataError

from .legacy import FLAT_FIELDS, recorded_identity
from .loading import field_path, find_smoke_overlay, load_chain, merge, normalise, read_mapping
from .objective import OPTION_DEFAULTS, SECTIONS, ObjectiveSection
from .packaged import resolve_config
from .schema import AlignSection, DataSection, ModelSection, ScheduleSection, SmokeSection


@dataclass(init=False)
class TrainConfig:
    """A training run's configuration (module docstring). ``TrainConfig(**fields)`` takes what ``from_dict``
    takes without checking it (but for an option its objective does not have: refused at once); ``from_dict`` and
    ``load`` check types and values."""

    name: str
    data: DataSection
    model: ModelSection
    objective: ObjectiveSection
    align: AlignSection
    schedule: ScheduleSection
    smoke: SmokeSection

    def __setattr__(self, name: str, value: Any) -> None:
        # a flat name set as an attribute (cfg.epochs = 3) would be silently ignored by the sections
        if name not in self.__dataclass_fields__:
            raise AttributeError(
                f"TrainConfig has no attribute {name!r}: fields live in sections; use "
                f"cfg.set({name!r}, value) or cfg.<section>.<field>"
            )
        super().__setattr__(name, value)

    def __init__(self, **values: Any):
        self._fill(normalise(values, "<TrainConfig>"), "<TrainConfig>")

    def _fill(self, nested: dict[str, Any], source: str) -> None:
        self.name = nested.get("name", "demo")
        for section in SECTIONS:
            given = nested.get(section.key, {})
            setattr(self, section.key, given if isinstance(given, section) else section.from_values(given, source))

    # -- construction --------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> TrainConfig:
        """A checked config from flat names, dotted paths or section mappings; errors name ``source``."""
        cfg = cls.__new__(cls)
        cfg._fill(normalise(data, source), source)
        cfg.validate(source)
        return cfg

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        """The config of a file, or of the packaged config ``path`` names (``mule-full``,
        ``f8k-full/polyvse-best``), and its ``base:`` chain, on top of the smoke overlay if there is one."""
        path = resolve_config(path)
        chain: list[Path] = []
        nested = load_chain(path, files=chain)
        nested.setdefault("name", path.stem)
        overlay = find_smoke_overlay(path, chain)
        if overlay is not None:
            nested = merge(normalise(read_mapping(overlay), str(overlay)), nested)
        return cls.from_dict(nested, source=str(path))

    def with_overrides(self, assignments: dict[str, Any], source: str) -> TrainConfig:
        """A checked copy with flat names / dotted paths / sections set."""
        return type(self).from_dict(
            merge(normalise(self.to_nested(), source), normalise(assignments, source)), source=source
        )

    # -- fields by flat name or dotted path ------------------------------------------------------------
    def get(self, name: str) -> Any:
        """A field's value by its flat name (``embed_dim``) or path (``model.embed_dim``); an objective's option
        as the flat form has it (its default when the objective has no such option)."""
        section, field_name = field_path(name)
        return getattr(getattr(self, section), field_name)

    def set(self, name: str, value: Any) -> None:
        """Set a field by flat name or path, unchecked (``validate`` checks). Another objective takes the options
        it shares with the one before (the others must be at their defaults)."""
        section, field_name = field_path(name)
        if section == ObjectiveSection.key and (field_name in OPTION_DEFAULTS or field_name == "name"):
            values = dataclasses.asdict(self.objective)
            (values["options"] if field_name in OPTION_DEFAULTS else values)[field_name] = value
            self.objective = ObjectiveSection.from_values(values, "<set>")
        else:
            setattr(getattr(self, section), field_name, value)

    # -- forms ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The flat form (what checkpoints, metrics.json and the zoo record): every field by its flat name, the
        options of every objective among them (those of other objectives than this config's at their defaults)."""
        out: dict[str, Any] = {"name": self.name}
        for section in SECTIONS:
            values = dataclasses.asdict(getattr(self, section.key))
            out.update({section.flat_name(f.name): values[f.name] for f in section.own_fields()})
        out.update({name: getattr(self.objective, name) for name in OPTION_DEFAULTS})
        return out

    def to_nested(self) -> dict[str, Any]:
        """The sectioned form, as a config file writes it (the objective's options in its own block)."""
        out = {"name": self.name, **{s.key: dataclasses.asdict(getattr(self, s.key)) for s in SECTIONS}}
        options = out[ObjectiveSection.key].pop("options")
        if options:
            out[ObjectiveSection.key][self.objective.name] = options
        return out

    def for_smoke(self) -> TrainConfig:
        """This config as a ``--smoke`` run builds its objective (a copy): every field it has that the smoke
        section caps (``smoke.caps``: configs/overlays/smoke.yaml) at most its cap."""
        out = copy.deepcopy(self)
        for name, cap in self.smoke.caps.items():
            section, field_name = FLAT_FIELDS[name]
            holder = getattr(out, section)
            holder = holder.options if section == ObjectiveSection.key and name in OPTION_DEFAULTS else holder
            if hasattr(holder, field_name) and getattr(holder, field_name) > cap:
                out.set(name, cap)
        return out

    # -- checks --------------------------------------------------------------------------------------
    def validate(self, source: str = "<config>") -> None:
        """Every field's type, every section's own checks, then the ones that span sections; errors name the
        field path."""
        if not isinstance(self.name, str):
            raise DataError(f"field 'name' must be str, got {self.name!r}", source)
        for section in SECTIONS:
            getattr(self, section.key).check_types(source)
        for section in SECTIONS:

            def fail(name: str, message: str, key: str = section.key) -> None:
                raise DataError(f"{key}.{name}: {message}", source)

            getattr(self, section.key).check(fail)
        self._check_across_sections(source)

    def _check_across_sections(self, source: str) -> None:
        langs = self.data.languages
        model = self.model

        def fail(name: str, message: str) -> None:
            raise DataError(f"{ObjectiveSection.key}.{name}: {message}", source)

        self.objective.check_config(self, fail)
        unknown = [name for name in self.smoke.caps if name not in FLAT_FIELDS]
        if unknown:
            raise DataError(f"smoke.caps: {unknown[0]!r} is not a field's flat name", source)
        if model.language_map and self.objective.name != "translator":
            raise DataError(
                f"model.language_map {model.language_map}: the Translator's map; set objective.name: "
                f"translator (not {self.objective.name})",
                source,
            )
        self._check_backbone_training(source)
        if model.text_finetune_layers and (
            model.text_encoder != "pretrained" or not model.pretrained_encoder.startswith("e5-small")
        ):
            raise DataError(
                f"model.text_finetune_layers: the trainable text tail is e5-small's; set "
                f"text_encoder: pretrained and pretrained_encoder: e5-small (or e5-small+use-multilingual), "
                f"not {model.text_encoder!r} / {model.pretrained_encoder!r}",
                source,
            )
        if self.align.uses_lexicon and self.align.pivot not in langs:
            raise DataError(f"align.pivot {self.align.pivot!r} is not among data.languages {langs}", source)

    def _check_backbone_training(self, source: str) -> None:
        """The image backbone's fine-tuning (model.finetune_blocks, model.finetune_backbone) against the data."""
        model, data = self.model, self.data
        which = "finetune_backbone" if model.finetune_backbone else "finetune_blocks" if model.finetune_blocks else ""
        if model.finetune_backbone and data.photo_views > 1:
            raise DataError(
                f"data.photo_views {data.photo_views}: the pixel path (model.finetune_backbone) crops "
                "every photo afresh for every step already; set photo_views: 1",
                source,
            )
        if data.resident_photos and not model.finetune_backbone:
            raise DataError(
                "data.resident_photos keeps the pixel path's photos on the device; set "
                "model.finetune_backbone: true, or remove resident_photos",
                source,
            )
        if not model.finetune_backbone and data.photo_views == 1 and data.crop_scale_min != DataSection.crop_scale_min:
            raise DataError(
                f"data.crop_scale_min {data.crop_scale_min}: only the pixel path and augmented views crop "
                "photos; set model.finetune_backbone: true or data.photo_views > 1, or remove "
                "crop_scale_min",
                source,
            )
        if not which:
            return
        if not re.fullmatch(r"efficientnet-lite[0-9]", data.backbone):
            raise DataError(
                f"model.{which}: only an EfficientNet-Lite backbone can be cut and fine-tuned, "
                f"not data.backbone {data.backbone!r}; use efficientnet-lite0/1/2",
                source,
            )
        if data.ten_crop:
            raise DataError(
                f"model.{which}: the backbone trains on one crop of a photo; set data.ten_crop: false", source
            )
        if model.finetune_backbone and model.finetune_blocks:
            raise DataError(
                f"model.finetune_blocks {model.finetune_blocks}: model.finetune_backbone trains every "
                "block already; set finetune_blocks: 0",
                source,
            )


def changed_fields(flat: dict[str, Any]) -> dict[str, Any]:
    """The fields of a flat config that differ from TrainConfig's defaults. What identifies a run: a field added
    to TrainConfig later, with a default that keeps the old behaviour, changes neither a finished run's digest
    nor a saved training state's key, so neither turns stale. So too the Translator's name: it was objective vse
    with the Translator's fields (source_language, language_map, one of which it needs) before it had one, and
    its runs keep the identity they were recorded with."""
    defaults = TrainConfig().to_dict()
    flat = recorded_identity(flat)
    return {k: v for k, v in flat.items() if k not in defaults or defaults[k] != v}
