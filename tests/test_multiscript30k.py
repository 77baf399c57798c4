"""MultiScript30k reader (polyvse.data.multiscript30k): lines aligned with Multi30K task1's image lists, empty lines
skipped, a misaligned file refused by name; the real corpus at hand; `polyvse data fetch multiscript30k --from`."""

from __future__ import annotations

import pytest

from conftest import _gz, _txt
from polyvse.data.multiscript30k import MultiScript30kReader, relative_files
from polyvse.errors import DataError


def test_lines_follow_the_image_list_and_skip_empty_lines(tiny_root):
    _gz(tiny_root / "multiscript30k" / "en-es" / "train.es.gz", ["un perro", ""])
    lines = MultiScript30kReader(tiny_root).lines("es", "train")
    assert [(ln.photo_id, ln.text, ln.split, ln.line) for ln in lines] == [("100", "un perro", "train", 1)]


def test_a_misaligned_file_and_a_missing_split_are_named(tiny_root):
    path = tiny_root / "multiscript30k" / "en-qu" / "val.qu.gz"
    _gz(path, ["huk", "iskay"])  # val has one image
    with pytest.raises(DataError, match="not aligned") as err:
        MultiScript30kReader(tiny_root).lines("qu", "val")
    assert str(path) in str(err.value)
    with pytest.raises(DataError, match="no test_2016_flickr file"):
        MultiScript30kReader(tiny_root).lines("gn", "test_2016_flickr")
    with pytest.raises(DataError, match="has no language 'xx'"):
        MultiScript30kReader(tiny_root).lines("xx", "train")


@pytest.mark.slow
def test_the_corpus_at_hand(shared_data):
    reader = MultiScript30kReader(shared_data)
    for lang in ("es", "ar", "zh", "qu", "gn"):
        lines = reader.lines(lang, "train")
        assert 28_000 < len(lines) < 29_000, lang  # 29,000 lines less the empty ones
    test = reader.lines("es", "test_2016_flickr")
    assert 900 < len(test) <= 1000 and test[0].text.startswith("Un hombre")
    assert not reader.has("qu", "test_2016_flickr")


def test_fetch_copies_the_corpus_from_a_mirror(tiny_root, tmp_path):
    from polyvse.data.fetch import fetch

    mirror = tmp_path / "mirror"
    for rel in relative_files():
        _gz(mirror / rel, ["x"])
    _txt(mirror / "multiscript30k" / "README.md", "tiny\n")
    out = fetch("multiscript30k", tmp_path / "root", source_dir=mirror, progress=False)
    assert len(out.written) == len(relative_files()) + 1
    with pytest.raises(DataError, match="lacks"):
        (mirror / relative_files()[0]).unlink()
        fetch("multiscript30k", tmp_path / "root2", source_dir=mirror, progress=False)
