"""examples/: each script run as a user would run it, on real photos, STS pairs and MultiScript30k lines, with one
tiny frozen-tower (USE) model smoke-trained for them all; what each prints is checked against the library and the
command line computing the same thing."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import numpy as np
import pytest

import polyvse
from polyvse.index import PhotoIndex, Searcher, build_index
from polyvse.util.paths import cache_root
from polyvse_app.cli import main as cli
from polyvse_tooling.harness import free_port, serving

# the tiny USE-tower model (en, de) and 240 es-en MultiScript30k pairs of the adaptation tests
from test_adapt import base_checkpoint, es_pairs  # noqa: F401 (fixtures)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytestmark = pytest.mark.slow  # trains a model, starts a server


def example(name: str):
    """examples/<name>.py's main (the script loaded as a module, not run)."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=name)["main"]


@pytest.fixture(scope="module")
def checkpoint(base_checkpoint) -> Path:
    return base_checkpoint


@pytest.fixture(scope="module")
def photos(shared_data, tmp_path_factory) -> Path:
    """A folder of 12 real photos, one in a subfolder (indexing is recursive)."""
    folder = tmp_path_factory.mktemp("my-photos")
    (folder / "trip").mkdir()
    for i, src in enumerate(sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:12]):
        shutil.copyfile(src, folder / ("trip" if i == 0 else "") / src.name)
    return folder


def test_every_example_is_tested_here():
    tested = {"search_your_photos", "http_api", "teach_a_language", "score_captions"}
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


def test_search_your_photos_finds_what_the_command_line_finds(checkpoint, photos, tmp_path, capsys):
    index = tmp_path / "my_index"
    hits = example("search_your_photos")(
        [
            "--checkpoint",
            str(checkpoint),
            "--photos",
            str(photos),
            "--index",
            str(index),
            "--query",
            "a dog runs on the grass",
            "--lang",
            "en",
        ]
    )
    printed = capsys.readouterr().out
    assert "indexed 12 photos" in printed and len(hits) == 5
    opened = PhotoIndex.open(index)
    assert any(opened.photo(i).name.startswith("trip/") for i in range(opened.count))
    # the index it leaves is the command line's: `polyvse search` on it ranks the same photos
    assert cli(["search", "--index", str(index), "a dog runs on the grass", "--lang", "en", "-k", "5", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["results"]
    assert [h["name"] for h in shown] == [h.name for h in hits]
    assert all(f"{h.rank}. {h.score:.3f}  {h.name}" in printed for h in hits)


def test_http_api_answers_as_the_searcher_does(checkpoint, photos, tmp_path, capsys):
    model = polyvse.load(checkpoint)
    files = sorted(photos.rglob("*.jpg"))
    index = tmp_path / "index"
    build_index(
        model,
        files,
        index,
        cache_dir=cache_root() / "features",
        checkpoint_path=checkpoint,
        names=[p.relative_to(photos).as_posix() for p in files],
        progress=False,
    )
    expected = Searcher(model, PhotoIndex.open(index)).text("ein Hund läuft im Gras", "de", k=3).hits
    port = free_port()
    with serving(["--index", index, "--port", port, "--no-warm-up"], tmp_path / "serve.log", port, timeout=180) as (
        _,
        url,
    ):
        found = example("http_api")(
            [
                "--url",
                url,
                "--query",
                "ein Hund läuft im Gras",
                "--lang",
                "de",
                "-k",
                "3",
                "--photo",
                str(files[3]),
                "--save-thumbnail",
                str(tmp_path / "best.jpg"),
            ]
        )
    printed = capsys.readouterr().out
    assert [h["name"] for h in found["results"]] == [h.name for h in expected]
    assert "12 photos; languages: en (trained), de (trained)" in printed
    assert f"photos like {files[3]}: {files[3].relative_to(photos).as_posix()}" in printed  # itself first
    assert (tmp_path / "best.jpg").read_bytes()[:2] == b"\xff\xd8"


def test_http_api_says_what_the_server_refused(checkpoint, photos, tmp_path):
    model = polyvse.load(checkpoint)
    files = sorted(photos.glob("*.jpg"))[:3]
    build_index(
        model,
        files,
        tmp_path / "index",
        cache_dir=cache_root() / "features",
        checkpoint_path=checkpoint,
        progress=False,
    )
    port = free_port()
    with serving(
        ["--index", tmp_path / "index", "--port", port, "--no-warm-up"], tmp_path / "serve.log", port, timeout=180
    ) as (_, url):
        with pytest.raises(SystemExit, match=r"POST /api/search/text: 422 .*detail"):
            example("http_api")(["--url", url, "--query", "a dog", "--lang", "xx-nonsense"])


def test_teach_a_language_serves_it_beside_the_old_ones(checkpoint, es_pairs, tmp_path, capsys):
    out = tmp_path / "model-es"
    first = es_pairs.read_text(encoding="utf-8").splitlines()[1].split("\t")  # after the header line
    record = example("teach_a_language")(
        [
            "--checkpoint",
            str(checkpoint),
            "--lang",
            "es",
            "--parallel",
            str(es_pairs),
            "--out",
            str(out),
            "--query",
            first[0],
            "--epochs",
            "20",
        ]
    )
    printed = capsys.readouterr().out
    mr = record["held_out_translation_mr"]
    assert mr["adapted"] > mr["zero_shot"] and "held-out pairs matched (mR): zero-shot" in printed
    assert f"is closest to {record['closest']!r} (en, cosine" in printed
    adapted, base = polyvse.load(out), polyvse.load(checkpoint)
    assert "es" in adapted.adapted_languages
    assert np.allclose(adapted.encode_text(["a dog runs"], "en"), base.encode_text(["a dog runs"], "en"))


def test_score_captions_ranks_as_the_model_and_scores_sts_as_the_evaluation(
    checkpoint, photos, shared_data, tmp_path, capsys
):
    from polyvse.data.sts import load_sts
    from polyvse.evaluation.sts import sts_pearson

    sts = load_sts(shared_data, "sts14-images")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{g}\n" for (a, b), g in zip(sts.pairs[:60], sts.gold[:60])), encoding="utf-8")
    photo = sorted(photos.glob("*.jpg"))[0]
    captions = ["a dog runs on the grass", "two children play football", "a man rides a bicycle"]
    out = example("score_captions")(
        ["--checkpoint", str(checkpoint), "--photo", str(photo), "--captions", *captions, "--pairs", str(pairs)]
    )
    model = polyvse.load(checkpoint)
    scores = model.retrieval_scores(model.encode_image([photo]), model.encode_text(captions, "en"), lang="en")[0]
    assert [c for _, c in out["captions"]] == [captions[i] for i in np.argsort(-scores)]
    expected = sts_pearson(lambda t: model.encode_text(list(t), "en"), sts.pairs[:60], sts.gold[:60])
    assert out["pearson"] == pytest.approx(expected, abs=1e-4)
    assert f"Pearson r x 100 against the gold scores: {expected:.1f}" in capsys.readouterr().out


def test_score_captions_names_the_bad_line(checkpoint, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a dog\ta cat\t3.0\none field only\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{pairs}:2: 1 tab-separated fields, expected 2 or 3"):
        example("score_captions")(["--checkpoint", str(checkpoint), "--pairs", str(pairs)])
