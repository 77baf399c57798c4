"""`polyvse features extract`: counts extracted / cached / failed, default cache dir, --list, --strict."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from polyvse_app.cli import run
from polyvse_app.commands import features as features_cmd


def run_cli(argv: list[str]) -> int:
    """What `polyvse` does with this command (polyvse_app.cli.main), limited to the features command."""
    parser = argparse.ArgumentParser(prog="polyvse")
    sub = parser.add_subparsers(dest="command", required=True)
    features_cmd.register(sub)
    return run(parser, argv)


@pytest.fixture
def photo_dir(shared_data, tmp_path) -> Path:
    """3 real photos (one in a subfolder), a corrupt .jpg, a README and a hidden file that are not photos."""
    src = sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:3]
    d = tmp_path / "photos"
    (d / "more").mkdir(parents=True)
    shutil.copy(src[0], d / src[0].name)
    shutil.copy(src[1], d / src[1].name)
    shutil.copy(src[2], d / "more" / src[2].name.upper().replace(".JPG", ".JPEG"))
    (d / "broken.jpg").write_bytes(src[0].read_bytes()[:3000])
    (d / "README.txt").write_text("not a photo")
    (d / ".hidden.jpg").write_text("editor backup")
    return d


def test_extract_a_folder_then_everything_is_cached(photo_dir, tmp_path, capsys):
    cache = tmp_path / "cache"
    argv = ["features", "extract", "--images", str(photo_dir), "--cache-dir", str(cache), "--workers", "0", "--quiet"]
    assert run_cli(argv) == 0
    out = capsys.readouterr().out
    assert "4 photos: 3 extracted, 0 already cached, 1 failed" in out
    assert "broken.jpg" in out and "truncated" in out
    assert "efficientnet-lite0 (1280-d)" in out and str(cache) in out
    assert len(list(cache.rglob("*.npy"))) == 3

    assert run_cli(argv) == 0
    assert "4 photos: 0 extracted, 3 already cached, 1 failed" in capsys.readouterr().out


def test_default_cache_dir_is_cache_root_features(photo_dir, tmp_path, capsys, monkeypatch):
    root = tmp_path / "root"
    argv = [
        "features",
        "extract",
        "--images",
        str(photo_dir / "more"),
        "--data-root",
        str(root),
        "--workers",
        "0",
        "--quiet",
    ]
    monkeypatch.delenv("POLYVSE_CACHE", raising=False)
    assert run_cli(argv) == 0
    assert "1 photos: 1 extracted" in capsys.readouterr().out
    assert len(list((root / "cache" / "features").rglob("*.npy"))) == 1

    monkeypatch.setenv("POLYVSE_CACHE", str(tmp_path / "elsewhere"))  # polyvse.util.paths.cache_root honours it
    assert run_cli(argv) == 0
    assert "1 photos: 1 extracted" in capsys.readouterr().out
    assert len(list((tmp_path / "elsewhere" / "features").rglob("*.npy"))) == 1


def test_list_file_with_relative_paths_and_comments(photo_dir, tmp_path, capsys):
    names = sorted(p.name for p in photo_dir.glob("*.jpg") if p.name not in ("broken.jpg", ".hidden.jpg"))
    listing = photo_dir / "photos.txt"
    listing.write_text("# my photos\n" + "\n".join(names) + "\n\nmissing.jpg\n" + str(photo_dir / names[0]) + "\n")
    assert (
        run_cli(
            [
                "features",
                "extract",
                "--list",
                str(listing),
                "--cache-dir",
                str(tmp_path / "c"),
                "--workers",
                "0",
                "--quiet",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # the absolute duplicate of names[0] counts as extracted too (same bytes: computed once)
    assert "4 photos: 3 extracted, 0 already cached, 1 failed" in out
    assert "missing.jpg: file not found" in out


def test_strict_stops_with_an_error_naming_the_file(photo_dir, tmp_path, capsys):
    code = run_cli(
        [
            "features",
            "extract",
            "--images",
            str(photo_dir),
            "--cache-dir",
            str(tmp_path / "c"),
            "--strict",
            "--workers",
            "0",
            "--quiet",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "polyvse: error:" in err and "broken.jpg" in err and "truncated" in err


def test_two_workers_and_ten_crop(photo_dir, tmp_path, capsys):
    assert (
        run_cli(
            [
                "features",
                "extract",
                "--images",
                str(photo_dir / "more"),
                "--cache-dir",
                str(tmp_path / "c"),
                "--ten-crop",
                "--workers",
                "2",
                "--quiet",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "1 photos: 1 extracted" in out and "ten-crop" in out and "10crop" in out


def test_squash_extracts_into_the_squashing_extractors_cache(photo_dir, tmp_path, capsys):
    """--squash fills the cache a model trained on squashed photos reads (its key has .squash), with other numbers
    than the aspect-keeping centre crop for a photo that is not square."""
    import numpy as np
    from PIL import Image

    photo = photo_dir / "more"
    (name,) = [p for p in photo.iterdir()]
    assert Image.open(name).size[0] != Image.open(name).size[1]
    cache = tmp_path / "c"
    for extra in ([], ["--squash"]):
        assert (
            run_cli(
                [
                    "features",
                    "extract",
                    "--images",
                    str(photo),
                    "--cache-dir",
                    str(cache),
                    "--workers",
                    "0",
                    "--quiet",
                    *extra,
                ]
            )
            == 0
        )
    out = capsys.readouterr().out
    assert out.count("1 photos: 1 extracted") == 2 and "squashed" in out
    plain, squashed = sorted(cache.iterdir(), key=lambda d: ".squash" in d.name)
    assert squashed.name == plain.name.replace(".center.", ".center.squash.")
    (a,), (b,) = list(plain.rglob("*.npy")), list(squashed.rglob("*.npy"))
    assert not np.allclose(np.load(a), np.load(b), atol=1e-3)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--images", "/no/such/folder"], "no such folder"),
        (["--list", "/no/such/list.txt"], "list file not found"),
        (["--images", "{empty}"], "no image files found"),
        (["--images", "{photos}", "--backbone", "vgg19"], "unknown image backbone"),
        (["--images", "{photos}", "--workers", "-1"], "--workers"),
    ],
)
def test_bad_arguments_are_clear_errors(extra, message, photo_dir, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    extra = [a.format(empty=tmp_path / "empty", photos=photo_dir) for a in extra]
    assert run_cli(["features", "extract", *extra, "--cache-dir", str(tmp_path / "c"), "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_images_and_list_are_exclusive(tmp_path):
    with pytest.raises(SystemExit):
        run_cli(["features", "extract", "--images", str(tmp_path), "--list", str(tmp_path / "l.txt")])


def test_backbones_listing(capsys):
    assert run_cli(["features", "backbones"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("efficientnet-lite0") and "resnet152" in out


def test_registered_in_the_real_cli():
    pytest.importorskip("polyvse_app.commands.data", reason="the data command is not in this tree yet")
    from polyvse_app.cli import build_parser

    args = build_parser().parse_args(["features", "extract", "--images", "x"])
    assert args.func is features_cmd.run_extract and args.device == "auto"
    assert args.workers is None  # sized once the device is known (polyvse.device.loader_workers)
