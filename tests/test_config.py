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
        "x",
        3,
        1,
        ["en", "de"],
        True,
    )
    assert TrainConfig.from_dict(cfg.to_nested()) == cfg == TrainConfig.from_dict(cfg.to_dict())


def test_sections_flat_names_and_paths_are_the_same_fields(tmp_path):
    nested = TrainConfig.load(
        write(
            tmp_path / "a.yaml",
            "objective: {name: mule, top_k: 10}\nalign: {loss: true, every: 20}\nmodel: {embed_dim: 64}\n",
        )
    )
    flat = TrainConfig.from_dict(
        {"name": "a", "objective": "mule", "top_k": 10, "align": True, "align_every": 20, "embed_dim": 64}, source="x"
    )
    dotted = TrainConfig.from_dict(
        {
            "name": "a",
            "objective.name": "mule",
            "objective.top_k": 10,
            "align.loss": True,
            "align.every": 20,
            "model.embed_dim": 64,
        },
        source="x",
    )
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
    for text, message in (
        ("model: {embed_dim: 0}", r"model\.embed_dim: must be 1 or more"),
        ("similarity: dot", r"model\.similarity: 'dot': use one of cosine, order"),
        ("split: fold5of5", r"data\.split: 'fold5of5': fold index must be in 0..4"),
        ("top_k: 3\nmax_violation: true", r"objective\.max_violation: max_violation means top_k 1"),
        ("lp_epochs: 2", r"objective\.lp_epochs: an option of objective mule, not of vse"),
        ("objective: mule\nquotas: {it: 1}", r"objective\.mule\.quotas: languages \['it'\]"),
        ("align: {word_init: fasttext}", r"align\.word_init: 'fasttext'"),
        ("optimizer: lbfgs", r"schedule\.optimizer: 'lbfgs'"),
        ("text_head: deep", r"model\.text_head: 'deep': use one of linear, mlp"),
        ("tower_dropout: 1.0", r"model\.tower_dropout: 1\.0: a probability"),
    ):
        write(p, text + "\n")
        with pytest.raises(DataError, match=r"c\.yaml: " + message):
            TrainConfig.load(p)


@pytest.mark.parametrize(
    "text, message",
    [
        ("languages: [1, 2]", r"field data\.languages \('languages'\) must be list\[str\], got \[1, 2\]"),
        (
            "caption_limit: {en: many}",
            r"field data\.caption_limit \('caption_limit'\) must be dict\[str, int\], "
            r"got \{'en': 'many'\}",
        ),
        (
            "objective: mule\nquotas: {en: 1.5}",
            r"field objective\.mule\.quotas \('quotas'\) must be dict\[str, int\], got \{'en': 1\.5\}",
        ),
        ("data: {languages: en}", r"field data\.languages \('languages'\) must be list\[str\], got 'en'"),
        ("objective: {name: mule, mule: {quotas: {1: 2}}}", r"field objective\.mule\.quotas .*a key of quotas"),
        ("lr: 0.1\ngrad_clip: true", r"field schedule\.grad_clip \('grad_clip'\) must be float, got True"),
    ],
)
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


# -- the packaged configs ---------------------------------------------------------------------------------
def test_the_repo_configs_folder_is_the_packaged_one():
    """configs/ is a relative link to polyvse_train/configs/, so the repository's paths and the package's names
    read the same files; every packaged training config loads by its name."""
    from pathlib import Path

    from polyvse_train.config.packaged import CONFIG_DIR, packaged_configs

    link = Path(__file__).resolve().parents[1] / "configs"
    assert link.is_symlink() and not Path(link.readlink()).is_absolute() and link.resolve() == CONFIG_DIR
    names = packaged_configs()
    assert {"mule-full", "f8k-full/polyvse-best", "gpu/polyvse-full-finetune"} <= set(names)
    assert not {n for n in names if n.startswith(("adapt/", "zoo/", "overlays/"))}
    for name in names:
        assert TrainConfig.load(name) == TrainConfig.load(names[name].path)


def test_a_packaged_config_loads_by_name_from_anywhere(tmp_path, monkeypatch):
    """By name, by name with .yaml, by its repository path: whatever the working directory, since nothing is
    looked up relative to it but a path given as one."""
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    by_path = TrainConfig.load(Path(__file__).resolve().parents[1] / "configs" / "f8k-full" / "polyvse-best.yaml")
    for spec in ("f8k-full/polyvse-best", "f8k-full/polyvse-best.yaml", "configs/f8k-full/polyvse-best.yaml"):
        assert TrainConfig.load(spec) == by_path
    assert by_path.name == "f8k-full-polyvse-best" and TrainConfig.load("mule-full").objective.name == "mule"
    # a file of that name in the working directory is the user's own, and wins
    write(tmp_path / "mule-full.yaml", "name: mine\nepochs: 2\n")
    assert TrainConfig.load("mule-full.yaml").name == "mine"


def test_a_users_file_may_base_a_packaged_config_by_name(tmp_path):
    from polyvse_train.config.packaged import packaged_configs

    mine = TrainConfig.load(write(tmp_path / "mine.yaml", "base: mule-full\nschedule: {epochs: 2}\n"))
    packaged = TrainConfig.load("mule-full")
    assert mine.name == "mine" and mine.schedule.epochs == 2  # its own name, its own field
    assert mine.with_overrides({"epochs": packaged.schedule.epochs, "name": "mule-full"}, "t") == packaged
    nested = TrainConfig.load(write(tmp_path / "nested.yaml", "base: f8k-full/polyvse-best.yaml\n"))
    assert nested.data.backbone == "efficientnet-lite2" and "f8k-full/polyvse-best" in packaged_configs()
    # a file beside it that the base names is the base, before the packaged one
    write(tmp_path / "mule-full.yaml", "epochs: 7\n")
    beside = TrainConfig.load(write(tmp_path / "beside.yaml", "base: mule-full.yaml\n"))
    assert (beside.objective.name, beside.schedule.epochs) == ("vse", 7)
    assert TrainConfig.load(tmp_path / "mine.yaml").objective.name == "mule"  # `mule-full` names no file there


@pytest.mark.parametrize(
    "spec, close",
    [
        ("mule-ful", "mule-full, mule-full-mt"),
        ("polyvse-bst", "polyvse-best, f8k-full/polyvse-best"),
        ("f8k-full/e5-frozn", "f8k-full/e5-frozen"),
    ],
)
def test_an_unknown_name_is_refused_naming_close_ones(tmp_path, spec, close):
    with pytest.raises(
        DataError,
        match=rf"no packaged training config named '{spec}'; did you mean {close}.*"
        r"--list-configs",
    ):
        TrainConfig.load(spec)
    with pytest.raises(DataError, match=rf"mine\.yaml: no file .* named '{spec}'; did you mean {close}"):
        TrainConfig.load(write(tmp_path / "mine.yaml", f"base: {spec}\n"))


def test_list_configs_names_each_with_its_description(capsys):
    from polyvse_app import cli

    assert cli.main(["train", "--list-configs"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert (
        lines["mule-full"].split(None, 1)[1] == "MULE full (EmbN + NC + LC + LP): mule-nc-lc after 5 epochs of LP "
        "pretraining"
    )
    assert {"f8k-full/polyvse-best", "adapt/product", "zoo/cpu"} <= set(lines) and "overlays/smoke" not in lines
    assert out.index("training configs") < out.index("adaptation plans") < out.index("zoo specs")
    assert all(len(line) <= 140 for line in lines.values())
    assert cli.main(["train"]) == 2 and "--list-configs" in capsys.readouterr().err


def test_the_wheel_holds_the_packaged_configs(tmp_path):
    """`pip wheel` of a copy of the checkout (built in a temporary folder): every packaged file is in the wheel,
    where the package looks for it."""
    import shutil
    import subprocess
    import sys
    import zipfile
    from pathlib import Path

    from polyvse_train.config.packaged import CONFIG_DIR

    repo = Path(__file__).resolve().parents[1]
    copy = tmp_path / "src-copy"
    copy.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, copy / name)
    shutil.copytree(repo / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(copy),
            "-w",
            str(tmp_path / "dist"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("polyvse-*.whl")
    held = set(zipfile.ZipFile(wheel).namelist())
    shipped = {
        f"polyvse_train/configs/{p.relative_to(CONFIG_DIR).as_posix()}"
        for p in CONFIG_DIR.rglob("*")
        if p.is_file() and p.suffix in (".yaml", ".md")
    }
    assert len(shipped) > 35 and shipped <= held, sorted(shipped - held)
    assert {
        "polyvse_train/configs/f8k-full/polyvse-best.yaml",
        "polyvse_train/configs/adapt/product.yaml",
        "polyvse_train/configs/overlays/smoke.yaml",
    } <= held


def test_invalid_yaml_and_missing_file(tmp_path):
    p = write(tmp_path / "c.yaml", "epochs: [1\n")
    with pytest.raises(DataError, match="not valid YAML"):
        TrainConfig.load(p)
    with pytest.raises(DataError, match="cannot read config"):
        TrainConfig.load(tmp_path / "missing.yaml")


def test_base_chain_overrides_field_by_field(tmp_path):
    (tmp_path / "sub").mkdir()
    write(
        tmp_path / "root.yaml",
        "name: root\nepochs: 20\nobjective: {name: mule, top_k: 10, mule: {nc_weight: 1.0, lp_epochs: 2}}\n",
    )
    write(tmp_path / "sub" / "mid.yaml", "base: ../root.yaml\nobjective: {mule: {nc_weight: 0.5}}\n")
    leaf = TrainConfig.load(write(tmp_path / "leaf.yaml", "base: sub/mid.yaml\nschedule: {epochs: 3}\n"))
    assert leaf.name == "leaf"  # never inherited
    opts = leaf.objective.options  # option by option within the objective's block
    assert (leaf.objective.name, leaf.objective.top_k, opts.nc_weight, opts.lp_epochs, leaf.schedule.epochs) == (
        "mule",
        10,
        0.5,
        2,
        3,
    )


def test_base_cycle_and_missing_base_are_named(tmp_path):
    write(tmp_path / "a.yaml", "base: b.yaml\n")
    write(tmp_path / "b.yaml", "base: a.yaml\n")
    with pytest.raises(DataError, match=r"cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        TrainConfig.load(tmp_path / "a.yaml")
    with pytest.raises(
        DataError,
        match=r"c\.yaml: no file .*missing\.yaml and no packaged training config named "
        r"'missing'",
    ):
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


# -- an objective's own options ------------------------------------------------------------------------------
def test_an_objective_owns_its_options_in_its_own_block(tmp_path):
    from polyvse_train.objectives import OBJECTIVES
    from polyvse_train.objectives.mule import MuleOptions

    cfg = TrainConfig.load(
        write(tmp_path / "m.yaml", "objective: {name: mule, margin: 0.05, mule: {nc_weight: 1.0}}\n")
    )
    assert type(cfg.objective.options) is MuleOptions is OBJECTIVES["mule"].Options
    assert cfg.objective.options.nc_weight == 1.0 and cfg.objective.margin == 0.05
    # the flat name and the dotted path of the block are the same option
    for form in ({"objective": "mule", "nc_weight": 1.0}, {"objective": "mule", "objective.mule.nc_weight": 1.0}):
        assert TrainConfig.from_dict(form).objective.options == cfg.objective.options
    nested = cfg.to_nested()["objective"]
    assert nested["mule"]["nc_weight"] == 1.0 and "nc_weight" not in nested
    # the flat form keeps every option by its flat name, another objective's at its default
    flat = cfg.to_dict()
    assert (flat["nc_weight"], flat["beta"], flat["source_language"]) == (1.0, 1.0, "")
    assert TrainConfig.from_dict(flat) == cfg
    # reading an option through the section gives the flat form's value; setting it there is refused
    assert (cfg.objective.nc_weight, cfg.objective.teacher_students, cfg.get("beta")) == (1.0, [], 1.0)
    with pytest.raises(AttributeError, match=r"cfg.objective.options.nc_weight"):
        cfg.objective.nc_weight = 2.0
    cfg.set("nc_weight", 2.0)
    assert cfg.objective.options.nc_weight == 2.0


@pytest.mark.parametrize(
    "text, message",
    [
        # the layout before the options moved: a clear error naming the field and where it went
        (
            "objective: {name: mule, nc_weight: 1.0}",
            r"objective\.nc_weight: nc_weight has moved .* objective mule: write objective: \{name: mule, mule: \{nc_weight",
        ),
        ("objective.beta: 0.5", r"objective\.beta: beta has moved .* objective mlmme"),
        # an option of another objective, a block of another objective, an option the objective does not have
        ("objective: pivot\nbeta: 0.5", r"objective\.beta: an option of objective mlmme, not of pivot"),
        (
            "objective: {name: vse, mule: {nc_weight: 1.0}}",
            r"objective\.mule: the options of objective mule, in a config "
            r"of objective vse",
        ),
        (
            "objective: {name: mule, mule: {beta: 0.5}}",
            r"unknown field\(s\) objective\.mule\.beta; known fields of "
            r"objective\.mule: quotas, sampler, nc_weight",
        ),
        # each objective checks its own options: errors name the objective's block
        ("objective: {name: mlmme, mlmme: {beta: 2.0}}", r"objective\.mlmme\.beta: 2\.0: the weight of R_MM"),
        ("objective: {name: vse, vse: {ranking_loss: infonce}, top_k: 3}", r"objective\.vse\.ranking_loss: infonce"),
        ("objective: {name: mule, mule: {nc_weight: -1.0}}", r"objective\.mule\.nc_weight: must be 0 or more"),
        (
            "objective: {name: mule, mule: {nc_weight: one}}",
            r"field objective\.mule\.nc_weight \('nc_weight'\) must be float",
        ),
    ],
)
def test_misplaced_and_bad_options_are_named(tmp_path, text, message):
    with pytest.raises(DataError, match=r"c\.yaml: " + message):
        TrainConfig.load(write(tmp_path / "c.yaml", text + "\n"))


def test_an_objective_change_keeps_shared_options_and_refuses_foreign_ones():
    cfg = TrainConfig.from_dict({"objective": "pivot", "quotas": {"en": 1}})
    assert TrainConfig.from_dict({**cfg.to_dict(), "objective": "mule"}).objective.options.quotas == {"en": 1}
    mule = TrainConfig.from_dict({"objective": "mule", "nc_weight": 1.0})
    with pytest.raises(DataError, match=r"objective\.nc_weight: an option of objective mule, not of vse"):
        mule.with_overrides({"objective": "vse"}, source="--set")
    assert mule.with_overrides({"objective": "vse", "nc_weight": 0.0}, source="--set").objective.name == "vse"


def test_the_translator_is_named_and_keeps_its_recorded_identity():
    """The Translator was objective vse chosen by its fields; now it is objective translator. Its runs' identity
    (zoo digests, training-state keys) is what it was: the flat form with objective vse."""
    from polyvse_train.config import changed_fields

    cfg = TrainConfig.from_dict(
        {
            "objective": "translator",
            "languages": ["de", "fr"],
            "source_language": "de",
            "source_epochs": 2,
            "language_map": ["fr"],
        }
    )
    old = {**cfg.to_dict(), "objective": "vse"}  # what a run recorded before the name
    assert cfg.to_dict()["objective"] == "translator"
    assert changed_fields(cfg.to_dict()) == changed_fields(old)
    assert "objective" not in changed_fields(cfg.to_dict())


def test_smoke_caps_are_the_overlays_and_no_objective_knows_smoke():
    """A --smoke run's caps (MULE's LP epochs, the Translator's source-only epochs, AME's alignment period) come
    from the smoke section (configs/overlays/smoke.yaml) applied to a copy of the config; no objective constructor
    takes ``smoke``."""
    import inspect

    from polyvse_train.objectives import OBJECTIVES
    from polyvse_train.objectives.word_alignment import build_alignment

    for cls in OBJECTIVES.values():
        assert "smoke" not in inspect.signature(cls.__init__).parameters, cls.name
    assert "smoke" not in inspect.signature(build_alignment).parameters
    cfg = TrainConfig.from_dict({"objective": "mule", "lp_epochs": 5, "align": True, "align_every": 10})
    smoked = cfg.for_smoke()
    assert (smoked.objective.options.lp_epochs, smoked.align.every) == (1, 2)
    assert (cfg.objective.options.lp_epochs, cfg.align.every) == (5, 10)  # the run's own config is untouched
    vse = TrainConfig.from_dict({"objective": "vse", "smoke": {"caps": {"lp_epochs": 0, "epochs": 1}}})
    assert vse.for_smoke().to_dict() == {**vse.to_dict(), "epochs": 1}  # another objective's cap: no-op
    with pytest.raises(DataError, match="not a field's flat name"):
        TrainConfig.from_dict({"smoke": {"caps": {"nonsense": 1}}})


def test_two_objectives_may_give_one_option_name_different_defaults(monkeypatch):
    """Each objective's options are its own namespace: the tables take an option whose default differs between
    two objectives (this once broke the import), each objective keeps its default, and the other's option in the
    flat form, at either default, is ignored."""
    from dataclasses import dataclass

    from polyvse_train.config import objective as section
    from polyvse_train.objectives import ObjectiveOptions

    @dataclass
    class AOptions(ObjectiveOptions):
        weight: float = 1.0

    @dataclass
    class BOptions(ObjectiveOptions):
        weight: float = 0.5

    fake = {"a": type("A", (), {"Options": AOptions}), "b": type("B", (), {"Options": BOptions})}
    owners, by_objective, defaults = section._options_of_objectives(fake)
    assert owners == {"weight": ["a", "b"]} and by_objective == {"weight": {"a": 1.0, "b": 0.5}}
    assert defaults == {"weight": 1.0}  # what the flat form gives an objective without the option
    for name, value in zip(
        ("OBJECTIVES", "OPTION_OWNERS", "OPTION_DEFAULTS_BY", "OPTION_DEFAULTS"), (fake, owners, by_objective, defaults)
    ):
        monkeypatch.setattr(section, name, value)
    assert section.ObjectiveSection(name="b").options.weight == 0.5
    assert (
        section.ObjectiveSection.from_values({"name": "b", "options": {"weight": 0.25}}, "<t>").options.weight == 0.25
    )
