"""The documentation site (mkdocs.yml, docs/): `mkdocs build --strict` must pass without a single warning, the
command-line reference must list every command of `build_parser()`, the API reference every public module, and a
link to a record that does not exist must fail the build (docs/hooks/polyvse_docs.py)."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs")
pytest.importorskip("material")
pytest.importorskip("mkdocstrings_handlers.python")


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = _mkdocs_build(REPO / "mkdocs.yml", out)
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert proc.returncode == 0 and not warnings, f"mkdocs build --strict failed:\n{log[-6000:]}"
    return out


def _command_paths(parser: argparse.ArgumentParser, prefix=()) -> list[tuple[str, ...]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append(prefix + (name,))
                out += _command_paths(sub, prefix + (name,))
    return out


def test_cli_reference_lists_every_command_and_option(site):
    from polyvse_app.cli import build_parser

    paths = _command_paths(build_parser())
    assert len(paths) > 20  # the walk reached the subcommands (zoo run, index build, ...)
    missing = []
    for path in paths:
        page = site / "reference" / "cli" / f"polyvse-{path[0]}" / "index.html"
        text = page.read_text(encoding="utf-8") if page.exists() else ""
        if f'id="polyvse-{"-".join(path)}"' not in text:
            missing.append(" ".join(path))
    assert not missing, f"the CLI reference lacks: {missing}"
    # and every option of one command, as its parser knows it
    search = (site / "reference" / "cli" / "polyvse-search" / "index.html").read_text(encoding="utf-8")
    for flag in ("--index", "--lang", "--image", "--similar-to", "--json", "--device"):
        assert flag in search


def test_api_reference_has_every_public_module(site):
    modules = []
    for path in (REPO / "src" / "polyvse").rglob("*.py"):
        parts = list(path.relative_to(REPO / "src").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if "__pycache__" in path.parts or any(p.startswith("_") for p in parts) or len(parts) == 1:
            continue
        modules.append(".".join(parts))
    assert "polyvse.model.torch_model" in modules
    missing = [m for m in modules if not (site / "reference" / "api" / m / "index.html").exists()]
    assert not missing, f"no API page for {missing}"
    load = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="polyvse.load"' in load  # the entry point, from its docstring


def test_records_are_mirrored_and_linked(site):
    record = site / "records" / "results" / "languages-model.json"
    assert record.exists()
    assert (site / "records" / "results" / "index.html").exists()  # a folder listing for folder links
    # a page's link to a record outside docs/ (../results/...) lands on the mirrored copy
    decisions = (site / "decisions" / "index.html").read_text(encoding="utf-8")
    assert 'href="../records/results/model-crosslingual.json"' in decisions


@pytest.mark.parametrize("page, block", [("product-model.md", "product-model"), ("languages.md", "languages"),
                                         ("benchmarks.md", "bench")])
def test_result_pages_keep_their_generated_blocks(page, block):
    """`polyvse report` fills these blocks from the records; the pages must keep both markers."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    assert text.count(f"<!-- {block}:start -->") == 1 and text.count(f"<!-- {block}:end -->") == 1
    assert text.index(f"<!-- {block}:start -->") < text.index(f"<!-- {block}:end -->")


def test_a_link_to_a_missing_record_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    (docs / "hooks").mkdir(parents=True)
    (docs / "hooks" / "polyvse_docs.py").write_text(
        (REPO / "docs" / "hooks" / "polyvse_docs.py").read_text(encoding="utf-8"), encoding="utf-8")
    (docs / "index.md").write_text(textwrap.dedent("""\
        # t

        [exists](../results/languages-model.json), [missing](../results/no-such-record.json)
    """), encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text(textwrap.dedent(f"""\
        site_name: t
        docs_dir: {docs}
        exclude_docs: hooks/
        hooks: [{docs / 'hooks' / 'polyvse_docs.py'}]
        nav: [index.md]
    """), encoding="utf-8")
    # the copied hook must find the repository it documents
    hook = docs / "hooks" / "polyvse_docs.py"
    hook.write_text(hook.read_text(encoding="utf-8").replace(
        "REPO = Path(__file__).resolve().parents[2]", f"REPO = Path({str(REPO)!r})"), encoding="utf-8")
    proc = _mkdocs_build(config, tmp_path / "site")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-3000:]
    assert "no-such-record.json" in log
    assert "languages-model.json" not in "".join(l for l in log.splitlines() if "WARNING" in l)
    page = (tmp_path / "site" / "index.html")
    if page.exists():  # strict mode may stop before writing; when written, the good link points at the mirror
        assert "records/results/languages-model.json" in page.read_text(encoding="utf-8")
