import pytest

from polyvse.errors import DataError
from polyvse_train.config import TrainConfig


def test_yaml_round_trip(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("name: x\nepochs: 3\nlr: 1\nlanguages: [en, de]\nmax_violation: true\n")
    cfg = TrainConfig.load(p)
    assert (cfg.name, cfg.epochs, cfg.lr, cfg.languages, cfg.max_violation) == ("x", 3, 1, ["en", "de"], True)


def test_unknown_field_is_named_with_the_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("epoch: 3\n")
    with pytest.raises(DataError, match=r"c\.yaml.*unknown field\(s\) epoch"):
        TrainConfig.load(p)


def test_wrong_type_is_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("epochs: three\n")
    with pytest.raises(DataError, match="'epochs' must be int"):
        TrainConfig.load(p)
    p.write_text("epochs: true\n")
    with pytest.raises(DataError, match="'epochs' must be int"):
        TrainConfig.load(p)


def test_invalid_yaml_and_missing_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("epochs: [1\n")
    with pytest.raises(DataError, match="not valid YAML"):
        TrainConfig.load(p)
    with pytest.raises(DataError, match="cannot read config"):
        TrainConfig.load(tmp_path / "missing.yaml")
