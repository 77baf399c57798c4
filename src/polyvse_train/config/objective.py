"""The objective section: the objective's name, the ranking settings every objective shares, and the objective's
own options, in a namespace of its own (``OBJECTIVES[name].Options``): two objectives may give an option of the same
name different defaults. The flat form (polyvse_train.config.legacy) names every objective's options by their flat
names; an option this config's objective lacks stands there at its first owner's default."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from polyvse.errors import DataError

from ..objectives import OBJECTIVES, ObjectiveOptions
from ..sections import Section, at_least, one_of
from .schema import AlignSection, DataSection, ModelSection, ScheduleSection, SmokeSection


@dataclass
class ObjectiveSection(Section):
    """The training objective: its name, the ranking settings every objective shares, and the objective's own
    options (``Options`` of its class in polyvse_train.objectives), written in a block named after it::

        objective: {name: mule, margin: 0.05, top_k: 10, mule: {nc_weight: 1.0, quotas: {en: 2}}}

    An option has a flat name too (``nc_weight``), and is read through the section as the flat form has it
    (``cfg.objective.nc_weight``: the objective's value, or the option's default when the objective has no such
    option); it is set only in the objective's options (``cfg.objective.options``, ``cfg.set``)."""

    key: ClassVar[str] = "objective"
    flat_names: ClassVar[dict[str, str]] = {"name": "objective"}
    # vse (hinge over mixed-language caption batches, the demo) | pivot | parallel | mlmme (batches of
    # distinct photos with one caption per language) | mule (several captions per language: top-K
    # image-sentence hinge + neighbourhood constraints + adversarial language classifier) | translator
    name: str = "vse"
    margin: float = 0.2
    max_violation: bool = False
    top_k: int = 0  # 0 = every in-batch negative; K = the K most violated (max_violation = top_k 1)
    # the first N epochs of the main schedule (after MULE's LP / the Translator's source stage) sum every
    # negative before top_k / max_violation take over: hard-negative mining from random init can collapse
    hard_negative_warmup_epochs: int = 0
    # the objective's own options: an instance of OBJECTIVES[name].Options (its defaults unless given)
    options: Any = None

    def __post_init__(self) -> None:
        if self.options is None:
            self.options = options_class(self.name)()

    def __getattr__(self, name: str) -> Any:
        # reached for what is not an attribute: an option, read as the flat form records it
        if name in OPTION_DEFAULTS:
            options = self.__dict__.get("options")
            return getattr(options, name) if hasattr(options, name) else copy.deepcopy(OPTION_DEFAULTS[name])
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in OPTION_DEFAULTS:  # it would land beside the options and change nothing
            raise AttributeError(
                f"{name} is an option of objective {', '.join(OPTION_OWNERS[name])}: set "
                f"cfg.objective.options.{name} or cfg.set({name!r}, value)"
            )
        super().__setattr__(name, value)

    @classmethod
    def own_fields(cls) -> list[dataclasses.Field]:
        return [f for f in fields(cls) if f.name != "options"]

    @classmethod
    def from_values(cls, values: dict[str, Any], source: str) -> ObjectiveSection:
        """The section of normalised ``values``: its fields, and ``options`` (a mapping of option: value, or an
        options object) made the named objective's options. The flat form lists the options of every objective:
        another objective's option is ignored at its default, refused naming it otherwise."""
        values = dict(values)
        given = values.pop("options", None)
        section = cls(**values)
        if isinstance(given, ObjectiveOptions):  # an options object given whole
            section.options = given
        if given is None or isinstance(given, ObjectiveOptions):
            return section
        own = {f.name for f in fields(type(section.options))}
        foreign = sorted(k for k, v in given.items() if k not in own and not is_a_default(k, v))
        if foreign and section.name not in OBJECTIVES:
            raise DataError(f"objective.name {section.name!r}: use one of {', '.join(OBJECTIVES)}", source)
        if foreign:
            owners = OPTION_OWNERS[foreign[0]]
            raise DataError(
                f"objective.{foreign[0]}: an option of objective {', '.join(owners)}, not of "
                f"{section.name}; remove it, or set objective.name: {owners[0]}",
                source,
            )
        section.options = type(section.options)(**{k: v for k, v in given.items() if k in own})
        return section

    def check_types(self, source: str, path: str = "") -> None:
        super().check_types(source, path)
        self.options.check_types(source, f"{self.key}.{self.name}")

    def check(self, fail) -> None:
        one_of(fail, self, "name", OBJECTIVES)
        for name in ("top_k", "hard_negative_warmup_epochs"):
            at_least(fail, self, name, 0)
        if self.max_violation and self.top_k not in (0, 1):
            fail("max_violation", "max_violation means top_k 1; set one of them")
        if type(self.options) is not options_class(self.name):
            fail(
                self.name,
                f"the options of objective {self.name} are {options_class(self.name).__name__}, "
                f"not {type(self.options).__name__}",
            )
        self.options.check(lambda name, message: fail(f"{self.name}.{name}", message))

    def check_config(self, cfg, fail) -> None:
        """The objective's checks against the rest of the config."""
        self.options.check_config(cfg, lambda name, message: fail(f"{self.name}.{name}", message))


def options_class(objective: str) -> type[ObjectiveOptions]:
    """The options dataclass of an objective (one without a registered objective has none)."""
    cls = OBJECTIVES.get(objective)
    return cls.Options if cls is not None else ObjectiveOptions


def _options_of_objectives(objectives: dict) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]], dict[str, Any]]:
    """The option tables of ``objectives`` (name -> class): each objective's options are its own, so an option's
    default may differ from one objective to another."""
    owners: dict[str, list[str]] = {}
    by_objective: dict[str, dict[str, Any]] = {}
    for name, cls in objectives.items():
        for f in fields(cls.Options):
            owners.setdefault(f.name, []).append(name)
            by_objective.setdefault(f.name, {})[name] = (
                f.default_factory() if f.default is dataclasses.MISSING else f.default
            )
    return owners, by_objective, {option: copy.deepcopy(next(iter(d.values()))) for option, d in by_objective.items()}


def is_a_default(option: str, value: Any) -> bool:
    """Whether ``value`` is ``option``'s default in one of the objectives that have it (another objective's option
    at such a value, in the flat form, says nothing)."""
    return any(value == default for default in OPTION_DEFAULTS_BY[option].values())


#: option -> the objectives that have it; option -> {objective: its default there}; option -> the default the
#: flat form gives it where the config's objective lacks it (its first owner's)
OPTION_OWNERS, OPTION_DEFAULTS_BY, OPTION_DEFAULTS = _options_of_objectives(OBJECTIVES)

SECTIONS: tuple[type[Section], ...] = (
    DataSection,
    ModelSection,
    ObjectiveSection,
    AlignSection,
    ScheduleSection,
    SmokeSection,
)
SECTION_BY_KEY = {s.key: s for s in SECTIONS}
