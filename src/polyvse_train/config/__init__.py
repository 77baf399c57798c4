"""Typed training configuration in sections (data, model, objective, align, schedule, smoke), loaded from
YAML/JSON. Each section is a dataclass that checks its own fields: pydantic, strictly, checks every value against
its field's type (``languages: [1, 2]``, ``quotas: {en: 1.5}`` and ``epochs: "3"`` are refused), then the section's
``check`` its values; errors name the file and the field path (``model.embed_dim``).

The configs that ship with polyvse (``polyvse_train/configs/``) load by name as well as by path
(``TrainConfig.load("mule-full")``; ``polyvse train --list-configs``). A config file may name a ``base:`` file
(a path relative to itself, else a packaged config's name) whose settings it overrides, section by section; chains are allowed, cycles are an error. A file's ``name`` defaults to its file name (it is never
inherited). The smoke settings (how few steps ``--smoke`` runs) of every config of a folder live in one overlay,
``overlays/smoke.yaml`` in that folder or one above it (``configs/overlays/smoke.yaml``), put under the chain:
what it sets holds unless the config names its own ``smoke:`` settings.

The objective section holds the objective's name, the ranking settings all objectives share, and the objective's
own options (each objective declares them: ``polyvse_train.objectives``), written in a block named after it
(``objective: {name: mule, mule: {nc_weight: 1.0}}``).

The objective's options are the objective's own: two objectives may give an option of one name different defaults.
A ``--smoke`` run builds its objective from ``TrainConfig.for_smoke()``: the smoke section's caps applied.

Every field also has a flat name, unique across sections and objectives (``embed_dim``, ``align_every``,
``objective``, ``nc_weight``): the names of the flat configs before the sections. ``from_dict``, ``--set`` and
``TrainConfig(**fields)`` accept flat names, dotted paths (``model.embed_dim``) and section mappings alike, and
``to_dict()`` gives the flat form, which checkpoints, metrics.json and the zoo store (so configs saved before the
sections still load).

One module a job: ``schema`` (the sections), ``objective`` (the objective section and its options), ``loading``
(files, the base: chain, the smoke overlay, normalising), ``legacy`` (the flat layout), ``packaged`` (the
packaged configs by name), ``train_config`` (TrainConfig).
"""

from .legacy import FLAT_FIELDS
from .train_config import TrainConfig, changed_fields

__all__ = ["FLAT_FIELDS", "TrainConfig", "changed_fields"]
