"""`polyvse demo`, the quick start's one command: it trains and evaluates, indexes the photos, shows one search, and
the `polyvse search` / `polyvse serve` commands it prints at its end run as printed. Smoke-sized training on the real
F8K-ML data, a folder of ten real photos to index."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from polyvse_app.cli import main as cli
from polyvse_app.commands.demo import DEMO_QUERY
from polyvse_tooling.harness import free_port, serving

pytestmark = pytest.mark.slow  # trains the demo model (smoke-sized), starts a server


#: the demo's model at a tenth of its width, on the smoke slice (test_index.py's tiny model's photos: features cached)
TINY = ["--set", "embed_dim=64", "--set", "word_dim=32", "--set", "hidden_dim=64", "--set", "smoke.photos=48"]


@pytest.fixture(scope="module")
def photos(shared_data, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("demo-photos")
    for src in sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:10]:
        shutil.copyfile(src, folder / src.name)
    return folder


@pytest.fixture(scope="module")
def demo(shared_data, photos, tmp_path_factory):
    """(output folder, what the demo printed) of one smoke demo."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("demo") / "run"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli(
            [
                "demo",
                "--out",
                str(out),
                "--smoke",
                "--quiet",
                "--images",
                str(photos),
                "--data-root",
                str(shared_data),
                *TINY,
            ]
        )
    assert code == 0, printed.getvalue()
    return out, printed.getvalue()


def next_commands(printed: str) -> list[list[str]]:
    """The argv (without the program) of every command the demo prints to run next."""
    tail = printed.split("\nnext,", 1)[1]
    return [shlex.split(line.split("    #")[0])[1:] for line in tail.splitlines() if line.startswith("  polyvse ")]


def test_demo_leaves_an_index_of_the_photos_built_by_its_checkpoint(demo, photos):
    out, printed = demo
    manifest = json.loads((out / "index" / "manifest.json").read_text())
    assert manifest["count"] == 10 and Path(manifest["model"]["checkpoint"]) == (out / "checkpoint").resolve()
    assert (out / "metrics.json").is_file() and "| en |" in printed  # the evaluation table came first
    assert f"indexing the photos: polyvse index build --checkpoint {out / 'checkpoint'} --images {photos}" in printed


def test_demo_shows_one_search_and_the_command_that_repeats_it(demo, capsys):
    out, printed = demo
    query, lang = DEMO_QUERY
    command = f"polyvse search --index {out / 'index'} {shlex.quote(query)} --lang {lang} -k 5"
    assert f"one search of it: {command}" in printed
    shown = printed.split(command, 1)[1].split("\nnext,", 1)[0].strip()
    assert shown.startswith(f"{query!r} (de): top 5 of 10 photos") and len(shown.splitlines()) == 2 + 5
    assert cli(shlex.split(command)[1:]) == 0
    assert capsys.readouterr().out.strip() == shown


def test_the_commands_the_demo_prints_run(demo, tmp_path, capsys):
    out, printed = demo
    commands = next_commands(printed)
    assert [c[0] for c in commands] == ["search", "search", "serve"]
    for argv, header in zip(
        commands[:2], ["'un chien court sur la plage' (fr): top 10 of 10 photos", ": top 10 of 10"]
    ):
        assert argv[argv.index("--index") + 1] == str(out / "index")
        assert cli(argv) == 0
        assert header in capsys.readouterr().out
    port = free_port()
    with serving(
        commands[2][1:] + ["--port", str(port), "--no-warm-up"], tmp_path / "serve.log", port, timeout=180
    ) as (_, url):
        import httpx

        assert httpx.get(url + "/api/health", timeout=30).json()["photos"] == 10


def test_a_demo_stopped_early_builds_no_index(shared_data, photos, tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        cli(
            [
                "demo",
                "--out",
                str(out),
                "--smoke",
                "--quiet",
                "--images",
                str(photos),
                "--data-root",
                str(shared_data),
                "--max-steps",
                "1",
                *TINY,
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "stopped at step 1; continue with --resume" in printed
    assert not (out / "index").exists() and "one search" not in printed


def test_the_quickstart_benchmark_reads_the_commands_the_demo_printed(demo):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        from bench_quickstart import demo_commands
    finally:
        sys.path.pop(0)
    out, printed = demo
    shown, search, serve = demo_commands(printed.splitlines())
    assert shown[0].startswith("indexing the photos: ") and shown[-1].endswith("a search page and the JSON API")
    assert search == ["search", "--index", str(out / "index"), DEMO_QUERY[0], "--lang", DEMO_QUERY[1], "-k", "5"]
    assert serve == ["serve", "--index", str(out / "index")]
