"""What the scripts, benchmarks and tests that run polyvse for real share: a free loopback port, `polyvse serve`
as a subprocess (started, waited for, stopped), and where a result came from (machine, git commit).

It imports, of polyvse, only the library's ``polyvse.provenance`` (re-exported: where a record came from), and
httpx when it waits for a server; the application it starts by name (`python -m polyvse_app serve`), never imports.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

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


def start_serve(
    args: Sequence[str], log, *, cwd: str | os.PathLike | None = None, env: dict | None = None
) -> subprocess.Popen:
    """`polyvse serve ARGS` (args without the word serve) in its own process group, output to ``log``."""
    return subprocess.Popen(
        [sys.executable, "-m", "polyvse_app", "serve", *map(str, args)],
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


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
def serving(
    args: Sequence[str], log_path: Path, port: int, *, timeout: float, cwd=None, env: dict | None = None
) -> Iterator[tuple[subprocess.Popen, str]]:
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


# -- where a result came from: polyvse.provenance (library), re-exported for the scripts ------------------
from polyvse.provenance import REPO, cpu_model, git, machine_line, provenance  # noqa: E402,F401
