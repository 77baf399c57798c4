"""`polyvse index build|add|info` and `polyvse search` on a tiny model trained on real F8K-ML photos."""

from __future__ import annotations

import json
import shutil

import pytest

from polyvse_app.cli import main
from test_index import N_FIRST, serving_assets


@pytest.fixture(scope="module")
def assets(shared_data, tmp_path_factory):
    return serving_assets(shared_data, tmp_path_factory)


@pytest.fixture(scope="module")
def cli_index(assets, tmp_path_factory):
    """An index built by the CLI from a folder holding the first N_FIRST photos."""
    tmp = tmp_path_factory.mktemp("cli")
    folder = tmp / "photos"
    folder.mkdir()
    for p in assets.photos[:N_FIRST]:
        shutil.copyfile(p, folder / p.name)
    out = tmp / "index"
    assert (
        main(
            [
                "index",
                "build",
                "--checkpoint",
                str(assets.checkpoint),
                "--images",
                str(folder),
                "--out",
                str(out),
                "--quiet",
                "--workers",
                "0",
            ]
        )
        == 0
    )
    return out


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_build_reports_and_info_describes(assets, cli_index, capsys):
    code, out, _ = run(capsys, "index", "info", "--index", str(cli_index))
    assert code == 0
    assert f"photos:     {N_FIRST}" in out and "exact search" in out and str(assets.checkpoint.resolve()) in out
    code, out, _ = run(capsys, "index", "info", "--index", str(cli_index), "--json")
    manifest = json.loads(out)
    assert manifest["count"] == N_FIRST and manifest["search"]["kind"] == "exact"


def test_text_search_prints_ranked_photos_with_scores(assets, cli_index, capsys):
    code, out, _ = run(capsys, "search", "--index", str(cli_index), assets.german_query, "--lang", "de", "-k", "5")
    assert code == 0, out
    lines = out.strip().splitlines()
    assert lines[0].startswith(f"{assets.german_query!r} (de): top 5 of {N_FIRST} photos")
    rows = [line.split() for line in lines if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4, 5]
    scores = [float(r[1]) for r in rows]
    assert scores == sorted(scores, reverse=True) and all(-1.0 <= s <= 1.0 for s in scores)
    assert all(r[3].endswith(".jpg") for r in rows)


def test_json_output_and_auto_language(assets, cli_index, capsys):
    code, out, _ = run(
        capsys,
        "search",
        "--index",
        str(cli_index),
        "zwei Hunde spielen im Schnee",
        "--lang",
        "auto",
        "-k",
        "3",
        "--json",
    )
    assert code == 0
    result = json.loads(out)
    assert result["lang"] == "de" and result["detected"]["lang"] == "de"
    assert result["detected"]["confidence"] >= 0.75
    assert [h["rank"] for h in result["results"]] == [1, 2, 3]
    code, out, _ = run(capsys, "search", "--index", str(cli_index), assets.english_query, "--lang", "auto")
    assert code == 0 and "(detected en, confidence" in out
    code, out, _ = run(capsys, "search", "--index", str(cli_index), assets.english_query, "--lang", "eng")
    assert code == 0 and "(en)" in out  # any ISO 639 code


def test_search_by_photo_and_by_id(assets, cli_index, capsys):
    target = assets.photos[4]
    code, out, _ = run(capsys, "search", "--index", str(cli_index), "--image", str(target), "-k", "3", "--json")
    assert code == 0
    hits = json.loads(out)["results"]
    assert hits[0]["name"] == target.name and hits[0]["score"] == pytest.approx(1.0, abs=1e-4)
    code, out, _ = run(capsys, "search", "--index", str(cli_index), "--similar-to", "4", "-k", "2")
    assert code == 0 and f"photos like #4 ({target.name})" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["Hund", "--lang", "auto"], "too short to tell"),
        (["los perros juegan en la nieve", "--lang", "auto"], "looks like Spanish"),
        (["a dog", "--lang", "xx"], "unknown language code 'xx'"),
        (["un chien", "--lang", "fr"], "not trained on 'fr'"),
        # a word-level model reads only its own languages (and `polyvse adapt` cannot teach it one)
        (["un perro", "--lang", "spa"], "train one that includes 'es'"),
        (["a dog", "--lang", "Spanish"], "for Spanish use 'es'"),
        (["   ", "--lang", "en"], "the query is empty"),
        (["x" * 10_000, "--lang", "en"], "the limit is 1000"),
        (["a dog"], "needs --lang"),
        (["a dog", "--lang", "en", "--image", "x.jpg"], "exactly one of"),
        (["--image", "/nonexistent/photo.jpg"], "file not found"),
        (["--similar-to", "9999"], "no photo with id 9999"),
        (["a dog", "--lang", "en", "-k", "0"], "k must be between 1 and"),
    ],
)
def test_bad_searches_fail_with_a_clear_message(cli_index, capsys, argv, message):
    code, _, err = run(capsys, "search", "--index", str(cli_index), *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_another_checkpoint_is_refused(assets, cli_index, capsys):
    code, _, err = run(
        capsys,
        "search",
        "--index",
        str(cli_index),
        assets.english_query,
        "--lang",
        "en",
        "--checkpoint",
        str(assets.other_checkpoint),
    )
    assert code == 2 and "this index was built with model" in err and "rebuild the index" in err
    code, _, err = run(capsys, "search", "--index", str(assets.checkpoint), "a dog", "--lang", "en")
    assert code == 2 and "not a polyvse index" in err


def test_add_appends_only_new_photos(assets, cli_index, tmp_path, capsys):
    index = tmp_path / "index"
    shutil.copytree(cli_index, index)
    listing = tmp_path / "photos.txt"
    indexed = sorted((cli_index.parent / "photos").glob("*.jpg"))  # the files the index holds
    listing.write_text("".join(f"{p}\n" for p in indexed + assets.photos[N_FIRST:]))  # old and new photos
    code, out, _ = run(
        capsys, "index", "add", "--index", str(index), "--list", str(listing), "--quiet", "--workers", "0"
    )
    n_new = len(assets.photos) - N_FIRST
    assert code == 0
    assert out.startswith(f"{n_new} photos added, {N_FIRST} already in the index, 0 unreadable (0 features computed")
    code, out, _ = run(capsys, "index", "info", "--index", str(index))
    assert f"photos:     {len(assets.photos)}" in out and "(generation 2)" in out
    code, _, err = run(
        capsys,
        "index",
        "add",
        "--index",
        str(index),
        "--list",
        str(listing),
        "--quiet",
        "--checkpoint",
        str(assets.other_checkpoint),
    )
    assert code == 2 and "this index was built with model" in err


def test_search_opens_the_make_model_index_by_default(assets, cli_index, tmp_path, monkeypatch, capsys):
    """Without --index, search opens runs/model/index (what `make model` builds), and says how to make it when
    it is not there."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "search", assets.english_query, "--lang", "en")
    assert code == 2 and "runs/model/index" in err and "make model" in err
    shutil.copytree(cli_index, tmp_path / "runs" / "model" / "index")
    code, out, _ = run(capsys, "search", assets.english_query, "--lang", "en", "-k", "3")
    assert code == 0 and len([x for x in out.splitlines() if x.strip()]) >= 3
