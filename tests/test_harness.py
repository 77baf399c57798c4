"""polyvse_tooling.harness: the free-port and server pieces the scripts, benchmarks and tests share."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from polyvse_tooling.harness import LOOPBACK, ServerError, cpu_model, free_port, machine_line, wait_until_up


def test_free_port_keeps_a_free_preferred_port_and_replaces_a_taken_one():
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        busy = taken.getsockname()[1]
        other = free_port(busy)
        assert other != busy and other > 0
    assert free_port(busy) == busy  # released: free again


def test_wait_until_up_reports_a_server_that_exited(tmp_path):
    log = tmp_path / "serve.log"
    log.write_text("polyvse: error: no index at X\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"])
    proc.wait()
    with pytest.raises(ServerError, match="exited with 2:\npolyvse: error: no index at X"):
        wait_until_up(proc, f"http://{LOOPBACK}:{free_port()}", timeout=5, log_path=log)


def test_machine_line_names_the_cpu():
    assert cpu_model() and f"({cpu_model()})" in machine_line()
