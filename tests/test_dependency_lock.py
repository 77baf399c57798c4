"""constraints.txt locks every package polyvse installs, direct and indirect: `make setup` installs through it, so a
kept machine and a fresh one get the same versions. This fails when a dependency (of a dependency) is unpinned or
pinned to another version than the one installed."""
from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]


def _locked() -> dict[str, str]:
    out = {}
    for n, line in enumerate((REPO / "constraints.txt").read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        assert m, f"constraints.txt:{n}: write NAME==VERSION, not {line!r}"
        out[canonicalize_name(m.group(1))] = m.group(2)
    return out


def _requirements(dist: metadata.Distribution, extras: set[str]) -> list[Requirement]:
    reqs = []
    for raw in dist.requires or ():
        req = Requirement(raw)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            reqs.append(req)
    return reqs


def test_every_installed_dependency_is_locked_at_its_installed_version():
    locked = _locked()
    seen: set[str] = set()
    todo = [(metadata.distribution("polyvse"), {"dev"})]
    while todo:
        dist, extras = todo.pop()
        for req in _requirements(dist, extras):
            name = canonicalize_name(req.name)
            if name in seen:
                continue
            seen.add(name)
            try:
                dep = metadata.distribution(req.name)
            except metadata.PackageNotFoundError:
                continue  # a requirement whose marker does not apply here (another platform's)
            assert name in locked, f"{req.name} (needed through {dist.metadata['Name']}) is not in constraints.txt"
            assert locked[name] == dep.version, (f"constraints.txt pins {req.name}=={locked[name]}, "
                                                 f"installed {dep.version}: regenerate the lock (README: Dependencies)")
            todo.append((dep, set(req.extras)))
    assert len(seen) > 60  # the walk reached the indirect dependencies


def test_pyproject_pins_match_the_lock():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    locked = _locked()
    for raw in project["dependencies"] + project["optional-dependencies"]["dev"]:
        req = Requirement(raw)
        pins = [s.version for s in req.specifier if s.operator == "=="]
        assert pins, f"pyproject.toml: {raw} is not pinned with =="
        assert locked.get(canonicalize_name(req.name)) == pins[0], f"{raw}: constraints.txt disagrees"
