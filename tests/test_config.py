"""TrainConfig: sections that check themselves, flat names and paths, base: chains, the smoke overlay."""
import pytest

from polyvse.errors import DataError
from polyvse_train.config import FLAT_FIELDS, TrainConfig


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_round_trip(tmp_path):
    p = write(tmp_path / "c.yaml", "name: x\nepochs: 3\nlr: 1\nlanguages: [en, de]\nmax_violation: true\n")
    cfg = TrainConfig.load(p)
    assert (cfg.name, cfg.schedule.epochs, cfg.schedule.lr, cfg.data.languages, cfg.objective.max_violation) == (
        "x", 3, 1, ["en", "de"], True)
    assert TrainConfig.from_dict(cfg.to_nested()) == cfg == TrainConfig.from_dict(cfg.to_dict())


def test_sections_flat_names_and_paths_are_the_same_fields(tmp_path):
    nested = TrainConfig.load(write(tmp_path / "a.yaml", "objective: {name: mule, top_k: 10}\n"
                                    "align: {loss: true, every: 20}\nmodel: {embed_dim: 64}\n"))
    flat = TrainConfig.from_dict({"name": "a", "objective": "mule", "top_k": 10, "align": True, "align_every": 20,
                                  "embed_dim": 64}, source="x")
    dotted = TrainConfig.from_dict({"name": "a", "objective.name": "mule", "objective.top_k": 10, "align.loss": True,
                                    "align.every": 20, "model.embed_dim": 64}, source="x")
    assert nested.to_dict() == flat.to_dict() == dotted.to_dict()
    assert nested.name == "a"  # a file's name defaults to its file name
    assert flat.get("align_every") == flat.get("align.every") == flat.align.every == 20
    assert len(FLAT_FIELDS) == len(TrainConfig().to_dict()) - 1  # every field has one flat name (+ name)


def test_unknown_field_is_named_with_the_file(tmp_path):
    p = write(tmp_path / "c.yaml", "epoch: 3\n")
    with pytest.raises(DataError, match=r"c\.yaml.*unknown field\(s\) epoch \(did you mean epochs"):
        TrainConfig.load(p)
    write(p, "model: {embed: 3}\n")
    with pytest.raises(DataError, match=r"c\.yaml.*unknown field\(s\) model\.embed .*fields of model"):
        TrainConfig.load(p)


def test_wrong_type_and_bad_value_name_the_field_path(tmp_path):
    p = write(tmp_path / "c.yaml", "epochs: three\n")
    with pytest.raises(DataError, match=r"c\.yaml: field schedule\.epochs \('epochs'\) must be int"):
        TrainConfig.load(p)
    write(p, "schedule: {epochs: true}\n")
    with pytest.raises(DataError, match=r"schedule\.epochs \('epochs'\) must be int"):
        TrainConfig.load(p)
    for text, message in (("model: {embed_dim: 0}", r"model\.embed_dim: must be 1 or more"),
                          ("similarity: dot", r"model\.similarity: 'dot': use one of cosine, order"),
                          ("split: fold5of5", r"data\.split: 'fold5of5': fold index must be in 0..4"),
                          ("top_k: 3\nmax_violation: true", r"objective\.max_violation: max_violation means top_k 1"),
                          ("lp_epochs: 2", r"objective\.lp_epochs: MULE's LP stage"),
                          ("quotas: {it: 1}", r"objective\.quotas: languages \['it'\]"),
                          ("align: {word_init: fasttext}", r"align\.word_init: 'fasttext'"),
                          ("optimizer: lbfgs", r"schedule\.optimizer: 'lbfgs'"),
                          ("text_head: deep", r"model\.text_head: 'deep': use one of linear, mlp"),
                          ("tower_dropout: 1.0", r"model\.tower_dropout: 1\.0: a probability")):
        write(p, text + "\n")
        with pytest.raises(DataError, match=r"c\.yaml: " + message):
            TrainConfig.load(p)


@pytest.mark.parametrize("text, message", [
    ("languages: [1, 2]", r"field data\.languages \('languages'\) must be list\[str\], got \[1, 2\]"),
    ("caption_limit: {en: many}", r"field data\.caption_limit \('caption_limit'\) must be dict\[str, int\], "
                                  r"got \{'en': 'many'\}"),
    ("quotas: {en: 1.5}", r"field objective\.quotas \('quotas'\) must be dict\[str, int\], got \{'en': 1\.5\}"),
    ("data: {languages: en}", r"field data\.languages \('languages'\) must be list\[str\], got 'en'"),
    ("objective: {quotas: {1: 2}}", r"field objective\.quotas .*a key of quotas"),
    ("lr: 0.1\ngrad_clip: true", r"field schedule\.grad_clip \('grad_clip'\) must be float, got True"),
])
def test_values_inside_lists_and_mappings_are_checked_too(tmp_path, text, message):
    """The types of what a list or mapping holds are checked, not only the container's (pydantic, strict)."""
    with pytest.raises(DataError, match=r"c\.yaml: " + message):
        TrainConfig.load(write(tmp_path / "c.yaml", text + "\n"))
    with pytest.raises(DataError, match=message):  # --set and the zoo's overrides go through from_dict
        TrainConfig().with_overrides(__import__("yaml").safe_load(text), source="--set")


def test_an_int_for_a_float_field_is_kept_as_written():
    """lr: 1 is a float field given an int: accepted, and kept an int, so the flat form (a run's digest) is the
    file's."""
    assert TrainConfig.from_dict({"lr": 1}).to_dict()["lr"] == 1 and TrainConfig.from_dict({"lr": 1}).schedule.lr == 1


def test_a_config_built_in_code_is_type_checked_when_validated():
    cfg = TrainConfig(languages=["en"])
    cfg.set("languages", ["en", 2])
    with pytest.raises(DataError, match=r"data\.languages .*languages\[1\]"):
        cfg.validate()


def test_every_config_file_in_the_repo_loads():
    """configs/*.yaml and configs/f8k-full/*.yaml: their base: chains, the smoke overlay and every check."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "configs"
    files = sorted(folder.glob("*.yaml")) + sorted((folder / "f8k-full").glob("*.yaml"))
    assert len(files) > 30
    for path in files:
        TrainConfig.load(path)


def test_invalid_yaml_and_missing_file(tmp_path):
    p = write(tmp_path / "c.yaml", "epochs: [1\n")
    with pytest.raises(DataError, match="not valid YAML"):
        TrainConfig.load(p)
    with pytest.raises(DataError, match="cannot read config"):
        TrainConfig.load(tmp_path / "missing.yaml")


def test_base_chain_overrides_field_by_field(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path / "root.yaml", "name: root\nobjective: {name: mule, top_k: 10, nc_weight: 1.0}\nepochs: 20\n")
    write(tmp_path / "sub" / "mid.yaml", "base: ../root.yaml\nobjective: {nc_weight: 0.5}\n")
    leaf = TrainConfig.load(write(tmp_path / "leaf.yaml", "base: sub/mid.yaml\nschedule: {epochs: 3}\n"))
    assert leaf.name == "leaf"  # never inherited
    assert (leaf.objective.name, leaf.objective.top_k, leaf.objective.nc_weight, leaf.schedule.epochs) == (
        "mule", 10, 0.5, 3)


def test_base_cycle_and_missing_base_are_named(tmp_path):
    write(tmp_path / "a.yaml", "base: b.yaml\n")
    write(tmp_path / "b.yaml", "base: a.yaml\n")
    with pytest.raises(DataError, match=r"cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        TrainConfig.load(tmp_path / "a.yaml")
    with pytest.raises(DataError, match=r"missing\.yaml: cannot read config"):
        TrainConfig.load(write(tmp_path / "c.yaml", "base: missing.yaml\n"))


def test_smoke_overlay_lies_under_the_config(tmp_path):
    (tmp_path / "overlays").mkdir()
    write(tmp_path / "overlays" / "smoke.yaml", "smoke: {photos: 32, max_batches: 6}\n")
    (tmp_path / "deeper").mkdir()
    plain = write(tmp_path / "deeper" / "plain.yaml", "epochs: 3\n")
    own = write(tmp_path / "own.yaml", "smoke: {max_batches: 3}\n")
    assert (TrainConfig.load(plain).smoke.photos, TrainConfig.load(plain).smoke.max_batches) == (32, 6)
    assert TrainConfig.load(own).smoke.max_batches == 3  # the config's own smoke settings win
    assert TrainConfig.load(write(tmp_path.parent / "alone.yaml", "epochs: 3\n")).smoke == TrainConfig().smoke


def test_old_flat_config_dicts_load():
    """A checkpoint or metrics.json written before the sections stores the flat form; it loads unchanged."""
    flat = TrainConfig(objective="mule", top_k=10, align=True, smoke_max_batches=6).to_dict()
    assert "embed_dim" in flat and "align_every" in flat and "model" not in flat
    cfg = TrainConfig.from_dict(flat)
    assert cfg.to_dict() == flat and cfg.align.loss and cfg.smoke.max_batches == 6


def test_setting_a_flat_name_as_an_attribute_is_an_error():
    """cfg.epochs = 3 would land beside the sections and change nothing: refused, pointing at cfg.set."""
    cfg = TrainConfig.from_dict({"epochs": 5})
    with pytest.raises(AttributeError, match=r"cfg.set\('epochs'"):
        cfg.epochs = 3
    cfg.set("epochs", 3)
    assert cfg.schedule.epochs == 3 and cfg.get("epochs") == 3
