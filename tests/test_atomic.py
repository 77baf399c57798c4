import json

import pytest

from polyvse.util.atomic import atomic_open, atomic_path, write_json_atomic


def test_success_replaces_and_failure_keeps_the_old_file(tmp_path):
    dest = tmp_path / "sub" / "f.txt"
    with atomic_open(dest) as fh:
        fh.write("old")
    assert dest.read_text() == "old" and oct(dest.stat().st_mode & 0o777) == "0o644"
    with pytest.raises(RuntimeError):
        with atomic_open(dest) as fh:
            fh.write("half-written")
            raise RuntimeError("killed")
    assert dest.read_text() == "old"
    assert [p.name for p in dest.parent.iterdir()] == ["f.txt"]  # no temporary file left behind


def test_nothing_is_visible_before_the_block_ends(tmp_path):
    dest = tmp_path / "f.bin"
    with atomic_open(dest, "wb", prefix=".tmp-", suffix=".part", fsync=False) as fh:
        fh.write(b"x")
        assert not dest.exists()
        assert [p.name[:5] for p in tmp_path.iterdir()] == [".tmp-"]
    assert dest.read_bytes() == b"x"


def test_atomic_path_for_writers_that_take_a_file_name(tmp_path):
    dest = tmp_path / "index.bin"
    with atomic_path(dest, suffix=".tmp") as tmp:
        tmp.write_bytes(b"abc")
        assert tmp.parent == dest.parent and tmp.name.endswith(".tmp")
    assert dest.read_bytes() == b"abc" and not tmp.exists()
    write_json_atomic(tmp_path / "m.json", {"a": "ü"})
    assert json.loads((tmp_path / "m.json").read_text(encoding="utf-8")) == {"a": "ü"}
