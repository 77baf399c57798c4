"""What the scripts, benchmarks and tests that run polyvse for real share: a free loopback port, `polyvse serve`
as a subprocess (started, waited for, stopped), and where a result came from (machine, git commit).

It lives in the trainer because the zoo records the machine its runs used; it imports nothing of polyvse, and
the application does not import it (`python -m polyvse_app serve` is started by name).
"""
from __future__ import annotations

import contextlib
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"


class ServerError(RuntimeError):
    """`polyvse serve` exited or did not answer in time; the message holds its log."""


# -- ports and servers ---------------------------------------------------------------------------------------
def free_port(preferred: int | None = None) -> int:
    """``preferred`` if it is free on the loopback interface, else a port the OS picks."""
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise ServerError("no free loopback port")


def start_serve(args: Sequence[str], log, *, cwd: str | os.PathLike | None = None,
                env: dict | None = None) -> subprocess.Popen:
    """`polyvse serve ARGS` (args without the word serve) in its own process group, output to ``log``."""
    return subprocess.Popen([sys.executable, "-m", "polyvse_app", "serve", *map(str, args)], cwd=cwd, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop_serve(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Ctrl+C (uvicorn shuts down gracefully), then kill if it has not exited within ``timeout``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def wait_until_up(proc: subprocess.Popen | None, base: str, timeout: float, log_path: Path | None = None) -> None:
    """Until GET base/api/health answers 200; ServerError (with the log) if ``proc`` (None: a server started
    elsewhere) exits or time runs out."""
    import httpx

    def log_text() -> str:
        return log_path.read_text(encoding="utf-8", errors="replace") if log_path else ""

    deadline = time.time() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise ServerError(f"polyvse serve exited with {proc.returncode}:\n{log_text()}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(base + "/api/health", timeout=5.0).status_code == 200:
                return
        if time.time() > deadline:
            raise ServerError(f"polyvse serve did not answer /api/health within {timeout:.0f} s:\n{log_text()}")
        time.sleep(0.5)


@contextlib.contextmanager
def serving(args: Sequence[str], log_path: Path, port: int, *, timeout: float, cwd=None,
            env: dict | None = None) -> Iterator[tuple[subprocess.Popen, str]]:
    """`polyvse serve ARGS` (which must bind ``port`` on the loopback) until the block ends; yields (process,
    base URL) once it answers."""
    with open(log_path, "w", encoding="utf-8") as log:
        proc = start_serve(args, log, cwd=cwd, env=env)
        try:
            base = f"http://{LOOPBACK}:{port}"
            wait_until_up(proc, base, timeout, log_path)
            yield proc, base
        finally:
            stop_serve(proc)


# -- where a result came from --------------------------------------------------------------------------------
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
