"""Reading the flat layout of configs saved before the sections (checkpoints, metrics.json, the zoo's records,
``--set embed_dim=...``): every field by a flat name unique across sections (``embed_dim``, ``align_every``,
``objective``, ``nc_weight``), and the errors for the layout before the objectives' options had blocks of their own."""

from __future__ import annotations

from typing import Any

from polyvse.errors import DataError

from .objective import OPTION_DEFAULTS, OPTION_OWNERS, SECTIONS, ObjectiveSection

#: flat name -> (section key, field name); an objective's option is ("objective", option)
FLAT_FIELDS: dict[str, tuple[str, str]] = {
    **{s.flat_name(f.name): (s.key, f.name) for s in SECTIONS for f in s.own_fields()},
    **{name: (ObjectiveSection.key, name) for name in OPTION_DEFAULTS},
}
assert len(FLAT_FIELDS) == sum(len(s.own_fields()) for s in SECTIONS) + len(OPTION_DEFAULTS), "flat names clash"


def moved_option(path: str, option: str, source: str) -> DataError:
    """The error for an objective's option written as a field of the section (the layout before the options)."""
    owners = OPTION_OWNERS[option]
    return DataError(
        f"{path}: {option} has moved into the objective's own block, as an option of objective "
        f"{', '.join(owners)}: write objective: {{name: {owners[0]}, {owners[0]}: {{{option}: ...}}}} "
        f"(or the flat name {option})",
        source,
    )


def recorded_identity(flat: dict[str, Any]) -> dict[str, Any]:
    """A flat config as the run identity it was recorded with: the Translator was objective vse with the
    Translator's fields (source_language, language_map, one of which it needs) before it had a name."""
    return {**flat, "objective": "vse"} if flat.get("objective") == "translator" else flat
