"""What the package carries besides its code: `polyvse --version` from the package's own version, the Apache-2.0
LICENSE that pyproject names (inside the wheel and the sdist), a CHANGELOG entry and a CITATION.cff for that
version, and the examples in the sdist."""

from __future__ import annotations

import importlib.metadata
import shutil
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

import polyvse
from polyvse_app.cli import main as cli

REPO = Path(__file__).resolve().parents[1]


def test_version_flag_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"polyvse {polyvse.__version__}"
    assert polyvse.__version__ == importlib.metadata.version("polyvse")


def test_changelog_and_citation_describe_this_version():
    version = polyvse.__version__
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "keepachangelog.com" in changelog and f"\n## [{version}]" in changelog
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["version"] == version and citation["license"] == "Apache-2.0"
    titles = " ".join(r["title"] for r in citation["references"])
    for paper in (
        "Image Pivoting",
        "Sentence-Level Multilingual",
        "Aligning Multilingual Word Embeddings",
        "Grounding Multilingual Concepts",
        "MULE",
    ):
        assert paper in titles


def test_license_is_the_apache_text_pyproject_names():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 150
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]


@pytest.mark.slow
def test_wheel_and_sdist_carry_the_license_and_the_sdist_the_rest(tmp_path, monkeypatch):
    from setuptools import build_meta

    tree = tmp_path / "tree"  # a copy: a build writes egg-info and build/ beside the sources
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(REPO / "examples", tree / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "CITATION.cff", "MANIFEST.in"):
        shutil.copyfile(REPO / name, tree / name)
    monkeypatch.chdir(tree)
    dist = tmp_path / "dist"
    wheel = zipfile.ZipFile(dist / build_meta.build_wheel(str(dist)))
    version = polyvse.__version__
    assert wheel.read(f"polyvse-{version}.dist-info/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
    assert "License-Expression: Apache-2.0" in wheel.read(f"polyvse-{version}.dist-info/METADATA").decode()
    with tarfile.open(dist / build_meta.build_sdist(str(dist))) as sdist:
        names = set(sdist.getnames())
    for name in ("LICENSE", "CHANGELOG.md", "CITATION.cff", "examples/search_your_photos.py"):
        assert f"polyvse-{version}/{name}" in names
