"""Loading a config: a file (or a packaged config's name) and its ``base:`` chain (each base a file relative to the
config, else a packaged config's name) on top of the smoke overlay (``overlays/smoke.yaml`` in the
config's folder or one above it; the packaged one under a chain that reaches a packaged config), and any mapping of flat names, dotted paths and section mappings normalised to
``{name, section: {field: value}}`` (the objective's options under ``objective: {options: {...}}``)."""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from polyvse.errors import DataError

from ..objectives import OBJECTIVES
from ..sections import Section
from .legacy import FLAT_FIELDS, moved_option
from .objective import OPTION_DEFAULTS, SECTION_BY_KEY, ObjectiveSection
from .packaged import CONFIG_DIR, resolve_config

SMOKE_OVERLAY = Path("overlays") / "smoke.yaml"

#: the normalised form's key of an objective's options (a config file names the block after the objective)
OPTIONS = "options"


def _unknown(name: str, source: str, where: str = "", known: list[str] | None = None) -> DataError:
    if known is None:
        known = sorted(FLAT_FIELDS) if not where else [f.name for f in SECTION_BY_KEY[where].own_fields()]
    close = difflib.get_close_matches(name.split(".")[-1], known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return DataError(
        f"unknown field(s) {name}{hint}; known {'fields of ' + where if where else 'fields'}: "
        f"{', '.join(known)}; sections: {', '.join(SECTION_BY_KEY)}",
        source,
    )


def normalise(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``{name, section: {field: value}}`` from any mix of flat names, dotted paths and section mappings; the
    objective's options, from its block or their flat names, under ``objective: {options: {...}}``."""
    if not isinstance(data, dict):
        raise DataError("a config must be a mapping of field: value", source)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "name":
            out["name"] = value
        elif key in SECTION_BY_KEY and isinstance(value, Section):
            out[key] = value
        elif key in SECTION_BY_KEY and isinstance(value, dict):
            for name, v in value.items():
                _put_path(out, (key, name), v, source, value)
        elif "." in key:
            _put_path(out, tuple(key.split(".")), value, source)
        elif key in FLAT_FIELDS:
            _put(out, *FLAT_FIELDS[key], value)
        else:
            raise _unknown(key, source)
    return out


def _put_path(out: dict, path: tuple[str, ...], value: Any, source: str, mapping: dict | None = None) -> None:
    """The value of ``section.field``, or the options of ``objective.<objective>`` (a block, or one option of it:
    ``objective.mule.nc_weight``); ``mapping``: the section mapping the path is in."""
    section = SECTION_BY_KEY.get(path[0])
    if section is None:
        raise _unknown(".".join(path), source)
    if section is ObjectiveSection and len(path) in (2, 3) and path[1] in (*OBJECTIVES, OPTIONS):
        _put_options(out, path[1], value if len(path) == 2 else {path[2]: value}, source, mapping or {})
    elif len(path) == 2 and path[1] in {f.name for f in section.own_fields()}:
        _put(out, section.key, path[1], value)
    elif section is ObjectiveSection and len(path) == 2 and path[1] in OPTION_DEFAULTS:
        raise moved_option(".".join(path), path[1], source)
    else:
        raise _unknown(".".join(path), source, section.key)


def _put_options(out: dict, block: str, options: Any, source: str, mapping: dict) -> None:
    where = f"{ObjectiveSection.key}.{block}"
    if not isinstance(options, dict):
        raise DataError(
            f"{where}: the options of objective {block}, a mapping of option: value; got {options!r}", source
        )
    known = list(OPTION_DEFAULTS)
    if block != OPTIONS:
        named = mapping.get("name")
        if named is not None and named != block:
            raise DataError(
                f"{where}: the options of objective {block}, in a config of objective {named}; write "
                f"them under objective.{named}",
                source,
            )
        known = [f.name for f in fields(OBJECTIVES[block].Options)]
    for option, value in options.items():
        if option not in known:
            raise _unknown(f"{where}.{option}", source, where, known)
        _put(out, ObjectiveSection.key, option, value)


def field_path(name: str) -> tuple[str, str]:
    """(section key, field name) of a flat name or a dotted path; DataError for neither. An objective's option is
    (``objective``, option)."""
    nested = normalise({name: None}, "<field>")
    section = next(k for k in nested if k != "name")
    values = nested[section]
    return section, next(iter(values[OPTIONS] if OPTIONS in values else values))


def _put(out: dict, section_key: str, name: str, value: Any) -> None:
    target = out.setdefault(section_key, {})
    if isinstance(target, Section):  # a section object given whole, then a field of it: copy, then set
        target = out[section_key] = dataclasses.asdict(target)
    if section_key == ObjectiveSection.key and name in OPTION_DEFAULTS:
        target = target.setdefault(OPTIONS, {})
    target[name] = value


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Normalised ``over`` on top of normalised ``base``, field by field within each section (and option by option
    within the objective's options)."""
    out = dict(base)
    for key, value in over.items():
        if key in SECTION_BY_KEY:
            below = out.get(key, {})
            below = dataclasses.asdict(below) if isinstance(below, Section) else below
            value = dataclasses.asdict(value) if isinstance(value, Section) else value
            out[key] = {**below, **value}
            if OPTIONS in below and OPTIONS in value:
                out[key][OPTIONS] = {**below[OPTIONS], **value[OPTIONS]}
        else:
            out[key] = value
    return out


# -- files ------------------------------------------------------------------------------------------------
def read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read config ({exc.strerror})", path) from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise DataError(f"not valid YAML/JSON: {exc}", path) from exc
    if not isinstance(data, dict):
        raise DataError("a config must be a mapping of field: value", path)
    return data


def load_chain(path: Path, seen: tuple[Path, ...] = (), files: list[Path] | None = None) -> dict[str, Any]:
    """The normalised settings of ``path`` on top of those of its ``base:`` file (recursively); ``files``, when
    given, gets every file of the chain."""
    resolved = path.resolve()
    if files is not None:
        files.append(resolved)
    if resolved in seen:
        chain = " -> ".join(str(p) for p in (*seen, resolved))
        raise DataError(f"the base: chain is a cycle: {chain}; remove one of the base: lines", path)
    data = dict(read_mapping(path))
    base = data.pop("base", None)
    nested = normalise(data, str(path))
    if base is None:
        return nested
    if not isinstance(base, str):
        raise DataError(
            f"base: must be a file path relative to this config or a packaged config's name (mule-full), got {base!r}",
            path,
        )
    parent = load_chain(resolve_config(base, relative_to=path.parent, source=path), (*seen, resolved), files)
    parent.pop("name", None)  # a name is never inherited
    return merge(parent, nested)


def find_smoke_overlay(config_path: Path, chain: list[Path] = ()) -> Path | None:
    """``overlays/smoke.yaml`` in the config's folder or the nearest folder above it that has one; else, for a
    config whose ``base:`` chain (``chain``: its files) reaches a packaged config, the packaged configs' overlay."""
    for folder in (config_path.resolve().parent, *config_path.resolve().parents):
        if (folder / SMOKE_OVERLAY).is_file():
            return folder / SMOKE_OVERLAY
    if any(f.is_relative_to(CONFIG_DIR) for f in chain) and (CONFIG_DIR / SMOKE_OVERLAY).is_file():
        return CONFIG_DIR / SMOKE_OVERLAY
    return None
