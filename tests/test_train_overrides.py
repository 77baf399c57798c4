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
    cfg = apply_overrides(TrainConfig(), parse("--eval-split", "val", "--set", "top_k=10", "--set",
                                               "quotas={en: 2, de: 1}", "--set", "languages=[en, de]",
                                               "--set", "max_violation=false"))
    assert (cfg.eval_split, cfg.top_k, cfg.quotas, cfg.languages) == ("val", 10, {"en": 2, "de": 1}, ["en", "de"])
    assert apply_overrides(TrainConfig(), parse()) == TrainConfig()


@pytest.mark.parametrize("item, message", [("top_k", "FIELD=VALUE"), ("topk=3", "unknown field"),
                                           ("top_k=ten", "must be int")])
def test_bad_overrides_name_the_problem(item, message):
    with pytest.raises(DataError, match=message):
        apply_overrides(TrainConfig(), parse("--set", item))
