"""`polyvse train --set FIELD=VALUE` and `--eval-split`: config overrides, typed like config files."""

from __future__ import annotations

import argparse

import pytest

from polyvse.errors import DataError
from polyvse_app.commands.train import add_common, apply_overrides
from polyvse_train.config import TrainConfig


def parse(*argv):
    p = argparse.ArgumentParser()
    add_common(p)
    return p.parse_args(list(argv))


def test_set_and_eval_split_override_fields():
    cfg = apply_overrides(
        TrainConfig(),
        parse(
            "--eval-split",
            "val",
            "--set",
            "top_k=10",
            "--set",
            "objective=mule",
            "--set",
            "quotas={en: 2, de: 1}",
            "--set",
            "languages=[en, de]",
            "--set",
            "max_violation=false",
            "--set",
            "model.embed_dim=64",
        ),
    )
    assert (
        cfg.data.eval_split,
        cfg.objective.top_k,
        cfg.objective.options.quotas,
        cfg.data.languages,
        cfg.model.embed_dim,
    ) == ("val", 10, {"en": 2, "de": 1}, ["en", "de"], 64)
    assert apply_overrides(TrainConfig(), parse()) == TrainConfig()


@pytest.mark.parametrize(
    "item, message",
    [
        ("top_k", "FIELD=VALUE"),
        ("topk=3", "unknown field"),
        ("model.topk=3", "fields of model"),
        ("top_k=ten", "objective.top_k .* must be int"),
        ("top_k=-1", "objective.top_k: must be 0"),
        ("quotas={en: 2}", "objective.quotas: an option of objective pivot"),
        ("objective.quotas={en: 2}", "quotas has moved"),
    ],
)
def test_bad_overrides_name_the_problem(item, message):
    with pytest.raises(DataError, match=message):
        apply_overrides(TrainConfig(), parse("--set", item))
