"""Where a written result came from: the machine, the commit, the date. Library code, so the application's
commands (`polyvse evaluate --json`) and the trainer's harness (runs, benchmarks, scripts) record it alike."""
from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

__all__ = ["cpu_model", "git", "machine_line", "provenance", "REPO"]

#: the checkout this package runs from (src/polyvse/.. /..)
REPO = Path(__file__).resolve().parents[2]


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_line() -> str:
    """One line for a page: cores, CPU, memory, GPU, OS, Python."""
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f", {int(line.split()[1]) / 1024 / 1024:.0f} GB RAM"
                break
    gpu = ""
    with contextlib.suppress(Exception):
        import torch

        gpu = ", GPU: " + torch.cuda.get_device_name(0) if torch.cuda.is_available() else ", no GPU"
    return (f"{os.cpu_count()} CPU cores ({cpu_model()}){mem}{gpu}; {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def provenance() -> dict:
    """What a written result says about where it came from: date, machine, commit, and whether tracked files had
    uncommitted changes (a figure must name a commit that reproduces it)."""
    import time

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"date": time.strftime("%Y-%m-%d"), "machine": machine_line(), "commit": git("rev-parse", "HEAD"),
            "dirty": None if status is None else bool(status)}


def git(*args: str, cwd: str | os.PathLike = REPO) -> str | None:
    """`git ARGS` in the repository: its stripped output, None where git cannot run."""
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30,
                              check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
