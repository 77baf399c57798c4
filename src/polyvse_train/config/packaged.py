"""The configs that ship inside the package (``polyvse_train/configs/``; the repository's ``configs/`` links to
it), found by name wherever polyvse is installed: ``polyvse train --config mule-full``, ``base: mule-full`` in a
user's file, ``polyvse model build --plan product``. A name is the file's path under that folder without its
suffix (``mule-full``, ``f8k-full/polyvse-best``); an existing file's path is always taken as a path first.

Three kinds of file live there: training configs (the folder's top level, ``f8k-full/``, ``gpu/``), adaptation
plans (``adapt/``) and zoo specs (``zoo/``); ``overlays/`` holds the smoke overlay, which is no config of its own.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from polyvse.errors import DataError

#: where the packaged configs are: beside this package, so no lookup depends on the working directory
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
SUFFIXES = (".yaml", ".yml", ".json")

TRAIN, PLAN, ZOO = "train", "plan", "zoo"
#: the folders holding other kinds than training configs (and the overlay folder, which holds none)
KIND_FOLDERS = {PLAN: "adapt", ZOO: "zoo"}
NOT_CONFIGS = ("overlays",)


@dataclass(frozen=True)
class PackagedConfig:
    name: str
    kind: str
    path: Path

    @property
    def description(self) -> str:
        return describe(self.path)


def packaged_configs(kind: str | None = TRAIN) -> dict[str, PackagedConfig]:
    """{name: config} of the packaged files of ``kind`` (None: every kind), in name order."""
    out = {}
    for path in sorted(CONFIG_DIR.rglob("*")):
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(CONFIG_DIR).with_suffix("")
        if rel.parts[0] in NOT_CONFIGS:
            continue
        found = next((k for k, folder in KIND_FOLDERS.items() if len(rel.parts) > 1 and rel.parts[0] == folder), TRAIN)
        if kind is None or found == kind:
            out[rel.as_posix()] = PackagedConfig(rel.as_posix(), found, path)
    return out


def _name_of(spec: str, kind: str) -> list[str]:
    """The names ``spec`` may mean: itself without a suffix and a leading ``configs/`` (a repository path), and
    for a plan or a zoo spec also under its kind's folder (``product`` = ``adapt/product``)."""
    name = spec.replace("\\", "/").removeprefix("./").removeprefix("configs/")
    for suffix in SUFFIXES:
        name = name.removesuffix(suffix)
    return [name] + ([f"{KIND_FOLDERS[kind]}/{name}"] if kind in KIND_FOLDERS else [])


def resolve_config(
    spec: str | Path, kind: str = TRAIN, relative_to: Path | None = None, source: str | Path | None = None
) -> Path:
    """The file ``spec`` names: an existing file (relative to ``relative_to`` where given, as a ``base:`` is, else
    to the working directory), else the packaged config of that name; a DataError naming close names otherwise
    (``source``: the file the name was written in)."""
    path = Path(spec).expanduser()
    candidate = path if relative_to is None or path.is_absolute() else relative_to / path
    if candidate.is_file():
        return candidate
    known = packaged_configs(kind)
    for name in _name_of(str(spec), kind):
        if name in known:
            return known[name].path
    raise unknown_config(str(spec), kind, candidate, source)


def unknown_config(spec: str, kind: str, candidate: Path, source: str | Path | None) -> DataError:
    if Path(spec).is_absolute() or spec.startswith((".", "~")):  # a path, not a name
        return DataError(f"cannot read config: no file {candidate}", source)
    names = list(packaged_configs(kind))
    wanted = _name_of(spec, kind)[0]
    # close by the name as written for this kind (product for adapt/product), or by the file name alone
    # (polyvse-best -> f8k-full/polyvse-best)
    short = {n.removeprefix(f"{KIND_FOLDERS[kind]}/") if kind in KIND_FOLDERS else n: n for n in names}
    close = [short[n] for n in difflib.get_close_matches(wanted, list(short), n=4, cutoff=0.6)]
    close += [n for n in names if n.rsplit("/", 1)[-1] == wanted.rsplit("/", 1)[-1] and n not in close]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    what = {TRAIN: "training config", PLAN: "adaptation plan", ZOO: "zoo spec"}[kind]
    return DataError(
        f"no file {candidate} and no packaged {what} named {wanted!r}{hint} (`polyvse train "
        f"--list-configs` lists them; a path to your own file works too)",
        source,
    )


def describe(path: Path) -> str:
    """A file's one-line description: the first sentence of its leading comment, without the trailing pointer
    to its docs page, at most 100 characters."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if not text:
            if lines:
                break
            continue
        lines.append(text)
    text = " ".join(lines)
    text = re.split(r"(?<=[\w)\]])\. (?=[A-Z(`])", text, maxsplit=1)[0].rstrip(".")
    text = re.sub(r":\s*(?:\.\./)?docs/\S+$", "", text)
    return text if len(text) <= 100 else text[:99].rstrip() + "…"


def list_configs() -> str:
    """The packaged configs by kind, a name and its description a line (``polyvse train --list-configs``)."""
    out = [f"packaged configs ({CONFIG_DIR}):"]
    for kind, title in (
        (TRAIN, "training configs: polyvse train --config NAME"),
        (PLAN, "adaptation plans: polyvse model build --plan NAME"),
        (ZOO, "zoo specs: polyvse zoo run --spec FILE"),
    ):
        configs = packaged_configs(kind)
        width = max(len(n) for n in configs)
        out += ["", title] + [f"  {c.name:<{width}}  {c.description}".rstrip() for c in configs.values()]
    return "\n".join(out)
