"""Tooling of the scripts, benchmarks and tests, above the application: nothing of polyvse imports it.

    harness   a free loopback port, `polyvse serve` as a subprocess, and where a result came from

What it imports of polyvse is the library's ``polyvse.provenance`` alone (tests/test_import_graph.py checks it); the
application it starts as a process, by name.
"""
