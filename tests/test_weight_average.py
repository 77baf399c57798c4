"""schedule.ema_decay: the moving average of the weights (polyvse_train.weight_average) and its place in a run."""

from __future__ import annotations

import pytest
import torch

from polyvse.model.checkpoint import load_checkpoint, load_training_state
from polyvse_train.config import TrainConfig
from polyvse_train.train import STATE, train
from polyvse_train.weight_average import WeightAverage


def small_net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))


def test_update_moves_each_float_tensor_by_one_minus_decay():
    net = small_net()
    avg = WeightAverage(net, 0.9)
    before = {k: v.clone() for k, v in avg.state_dict().items()}
    assert set(before) == {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"}
    net.train()
    net(torch.randn(8, 4))  # batch norm's running statistics move
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    avg.update(net)
    current = dict(net.named_parameters()) | dict(net.named_buffers())
    for name, old in before.items():
        expected = 0.9 * old + 0.1 * current[name].detach()
        assert torch.allclose(avg.state_dict()[name], expected, atol=1e-6), name
        assert not torch.allclose(avg.state_dict()[name], current[name].detach()), name


def test_copy_to_puts_the_average_into_the_model_and_leaves_integer_buffers():
    net = small_net()
    avg = WeightAverage(net, 0.5)
    start = net[0].weight.detach().clone()
    with torch.no_grad():
        net[0].weight.add_(2.0)
    net[1].num_batches_tracked.fill_(7)
    avg.update(net)
    avg.copy_to(net)
    assert torch.allclose(net[0].weight, start + 1.0)
    assert int(net[1].num_batches_tracked) == 7


def test_state_round_trip_and_a_mismatched_state_is_refused():
    net = small_net()
    avg = WeightAverage(net, 0.99)
    with torch.no_grad():
        net[0].bias.add_(1.0)
    avg.update(net)
    other = WeightAverage(small_net(), 0.99)
    other.load_state_dict(avg.state_dict())
    assert all(torch.equal(other.state_dict()[k], v) for k, v in avg.state_dict().items())
    with pytest.raises(KeyError, match="does not match"):
        WeightAverage(torch.nn.Linear(4, 3), 0.99).load_state_dict(avg.state_dict())


@pytest.mark.parametrize("decay", [0.0, 1.0, -0.1])
def test_a_decay_outside_the_open_interval_is_refused(decay):
    with pytest.raises(ValueError, match="ema decay"):
        WeightAverage(small_net(), decay)


@pytest.mark.parametrize("decay", [1.0, -0.5])
def test_config_refuses_a_decay_outside_zero_to_one(decay):
    with pytest.raises(Exception, match="ema_decay"):
        TrainConfig.from_dict({"ema_decay": decay}).validate()


SMALL = dict(
    name="tiny-ema",
    languages=["en", "de"],
    embed_dim=32,
    word_dim=16,
    hidden_dim=32,
    batch_size=32,
    smoke_photos=48,
    smoke_epochs=2,
    lr=5e-4,
    ema_decay=0.9,
)


def test_a_run_checkpoints_the_average_and_resumes_to_the_same_metrics(shared_data, tmp_path):
    """The checkpoint holds the average, not the last weights; a run stopped mid-way and resumed keeps the
    average in its training state and ends with the metrics of an uninterrupted run."""
    cfg = TrainConfig(**SMALL)
    whole = train(cfg, tmp_path / "whole", shared_data, smoke=True, progress=False)
    state = load_training_state(tmp_path / "whole" / STATE)
    model = load_checkpoint(tmp_path / "whole" / "checkpoint").model.state_dict()
    assert state["average"] and all(torch.equal(model[k], v) for k, v in state["average"].items())
    assert any(not torch.equal(state["model"][k], v) for k, v in state["average"].items())

    assert train(cfg, tmp_path / "split", shared_data, smoke=True, progress=False, max_steps=2) == {
        "stopped_at_step": 2
    }
    resumed = train(cfg, tmp_path / "split", shared_data, smoke=True, progress=False, resume=True)
    assert resumed["languages"] == whole["languages"]
