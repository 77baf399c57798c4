"""The base install (``pip install polyvse``, no extra: no torch) in a fresh virtual environment, from this checkout's
wheel and the lock: what tests/test_light_install.py runs the commands in and benchmarks/bench_light_install.py
measures. The standard library only.

    wheel = build_wheel(REPO, tmp)                 # pip wheel --no-deps
    venv = make_light_venv(REPO, wheel, tmp / "venv")  # python -m venv, then pip install -c constraints.txt WHEEL
    proc = run_polyvse(venv, ["evaluate", ...], cwd)   # its `polyvse`, in the environment a user's shell gives it

The packages come through pip's usual index and cache, held to constraints.txt's versions, so the environment
is the one a user of the lock gets; torch is checked to be absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["build_wheel", "light_env", "make_light_venv", "run_polyvse", "tree_bytes", "venv_python"]


def _run(argv: list, timeout: float) -> None:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, argv))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )


def build_wheel(repo: Path, dest: Path, timeout: float = 300) -> Path:
    """This checkout's polyvse wheel, built into ``dest`` with the running interpreter's setuptools."""
    dest.mkdir(parents=True, exist_ok=True)
    _run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", repo, "-w", dest],
        timeout,
    )
    wheels = sorted(dest.glob("polyvse-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"{dest}: expected one polyvse wheel, found {[w.name for w in wheels]}")
    return wheels[0]


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def make_light_venv(repo: Path, wheel: Path, venv: Path, python: str = sys.executable, timeout: float = 900) -> Path:
    """A fresh venv at ``venv`` holding ``wheel`` and its base dependencies at constraints.txt's versions (no
    extra); RuntimeError if torch came with them."""
    _run([python, "-m", "venv", venv], 600)
    py = venv_python(venv)
    _run(
        [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c", repo / "constraints.txt", wheel],
        timeout,
    )
    probe = subprocess.run(
        [str(py), "-c", "import importlib.util as u; print(u.find_spec('torch') is None)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.stdout.strip() != "True":
        raise RuntimeError(f"{venv}: torch was installed with the base dependencies ({probe.stdout}{probe.stderr})")
    return venv


def light_env() -> dict:
    """This process's environment less what would reach outside the venv or force an image encoder: the one a
    user's shell gives the light install's commands."""
    return {k: v for k, v in os.environ.items() if k not in ("POLYVSE_IMAGE_ENCODER", "PYTHONPATH")}


def run_polyvse(venv: Path, argv: list, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """The venv's ``polyvse ARGV`` run in ``cwd`` (its output captured; the caller checks the exit code)."""
    exe = venv / ("Scripts/polyvse.exe" if os.name == "nt" else "bin/polyvse")
    return subprocess.run(
        [str(exe), *map(str, argv)], cwd=cwd, env=light_env(), capture_output=True, text=True, timeout=timeout
    )


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (links not followed)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total
