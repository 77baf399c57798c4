"""Device plumbing (polyvse.device), tested on a CPU-only machine: CI has no GPU.

What these tests prove and what they do not:
* resolving --device, the no-CUDA error and the torchrun rank -> GPU mapping: with CUDA availability faked;
* inputs follow the model to its device: on the ``meta`` device (a second device a CPU machine has) and on
  fake CUDA tensors (torch's FakeTensorMode refuses mixing a CPU tensor into a CUDA op, as a GPU would),
  forward passes only -- numerics and backward passes on a real GPU are not tested here;
* checkpoints and training states written on a GPU load on a CPU: from files whose storages are tagged
  ``cuda:0`` exactly as torch.save writes them from a GPU (tagged by patching torch's location tagger).
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest
import torch

import polyvse.device as device_mod
from polyvse.device import (
    DeviceError,
    autocast,
    check_precision,
    loader_workers,
    pin_memory,
    resolve_device,
    to_device,
    training_precision,
)
from polyvse.modules import JointEmbeddingModel, ModelConfig


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(device_mod, "cuda_available", lambda: False)


@pytest.fixture
def two_fake_gpus(monkeypatch):
    if torch.cuda.is_available() and torch.cuda.device_count() < 2:  # seen on a one-GPU H200
        pytest.skip("a faked second GPU meets torch's real lazy CUDA init, which checks every device it counts")
    monkeypatch.setattr(device_mod, "cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


# -- resolving --device ------------------------------------------------------------------------------------
def test_auto_falls_back_to_cpu_without_cuda(no_cuda):
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(None) == torch.device("cpu")
    assert resolve_device("CPU") == torch.device("cpu")


@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "cuda:3"])
def test_asking_for_cuda_without_it_is_a_one_line_error(no_cuda, spec):
    with pytest.raises(DeviceError) as err:
        resolve_device(spec)
    message = str(err.value)
    assert "\n" not in message and "no CUDA GPU" in message and "--device cpu" in message and spec in message


def test_auto_and_cuda_pick_this_ranks_gpu_under_torchrun(two_fake_gpus, monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)  # one process: an explicit number wins
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_device("auto") == torch.device("cuda", 1)
    assert resolve_device("cuda") == torch.device("cuda", 1)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)  # this rank's own GPU, named
    assert resolve_device("cuda", local_rank=0) == torch.device("cuda", 0)


def test_a_fixed_gpu_under_a_multi_rank_torchrun_is_refused(two_fake_gpus, monkeypatch):
    """Every rank gets the same command line: `--device cuda:0` would put both ranks on GPU 0 (NCCL fails)."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(DeviceError) as err:
        resolve_device("cuda:0")
    message = str(err.value)
    assert "\n" not in message and "LOCAL_RANK 1" in message and "--device cuda or auto" in message
    monkeypatch.setenv("LOCAL_RANK", "2")  # a third rank on a 2-GPU machine
    with pytest.raises(DeviceError, match="at most 2 ranks per machine"):
        resolve_device("auto")


@pytest.mark.parametrize(
    "spec, words",
    [
        ("cuda:2", "2 CUDA GPU(s), numbered 0..1"),
        ("gpu", "auto, cpu, cuda"),
        ("cuda:x", "cuda:N"),
        ("cuda:-1", "cuda:N"),
    ],
)
def test_malformed_or_missing_gpu_names_the_problem(two_fake_gpus, spec, words):
    with pytest.raises(DeviceError, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        resolve_device(spec)


def _cpuinfo(tmp_path, flags: str):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: some CPU\nflags\t\t: fpu sse2 avx2 {flags}\n\n")
    return path


@pytest.mark.parametrize(
    "flags, native",
    [("avx512f avx512_bf16", True), ("amx_tile amx_bf16", True), ("avx512f avx512_vnni", False), ("", False)],
)
def test_auto_precision_trains_in_bf16_only_on_a_cpu_that_computes_it_natively(tmp_path, flags, native):
    cpuinfo = _cpuinfo(tmp_path, flags)
    assert device_mod.cpu_has_native_bf16(cpuinfo) is native
    assert training_precision("auto", torch.device("cpu"), cpuinfo=cpuinfo) == ("bf16" if native else "fp32")
    # an explicit choice is kept whatever the CPU: bf16 emulated is slow, not wrong
    assert training_precision("bf16", torch.device("cpu"), cpuinfo=cpuinfo) == "bf16"
    assert training_precision("fp32", torch.device("cpu"), cpuinfo=cpuinfo) == "fp32"


def test_auto_precision_without_a_cpuinfo_is_fp32_and_a_bad_name_lists_the_choices(
    tmp_path, two_fake_gpus, monkeypatch
):
    assert not device_mod.cpu_has_native_bf16(tmp_path / "absent")
    assert training_precision("auto", torch.device("cpu"), cpuinfo=tmp_path / "absent") == "fp32"
    for supported in (True, False):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda supported=supported: supported)
        assert training_precision("auto", torch.device("cuda", 0)) == ("bf16" if supported else "fp32")
    with pytest.raises(DeviceError, match="fp32, bf16, auto"):
        training_precision("fp16", torch.device("cpu"))


def test_bf16_features_are_cuda_only_training_steps_run_on_either_and_fp32_is_a_no_op(two_fake_gpus):
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert check_precision("bf16", gpu) == "bf16"
    with pytest.raises(DeviceError, match="features on CUDA only"):  # a CPU's bf16 features would fill the cache
        check_precision("bf16", cpu)
    with pytest.raises(DeviceError, match="features on CUDA only"):
        autocast(cpu, "bf16")
    assert check_precision("bf16", cpu, training=True) == "bf16"
    with pytest.raises(DeviceError, match="CUDA or the CPU"):
        check_precision("bf16", torch.device("meta"), training=True)
    with pytest.raises(DeviceError, match="fp32 or bf16"):
        check_precision("fp16", gpu)
    assert isinstance(autocast(cpu, "fp32"), contextlib.nullcontext)
    with autocast(cpu, "bf16", training=True):  # a training step on a CPU: its matmuls in bf16
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.bfloat16
    with warnings.catch_warnings():  # torch warns that it has no CUDA to autocast on
        warnings.simplefilter("ignore")
        assert isinstance(autocast(gpu, "bf16"), torch.autocast)


def test_loader_settings_follow_the_device(monkeypatch):
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr(device_mod, "usable_cores", lambda: 8)
    assert (loader_workers(cpu), loader_workers(gpu)) == (2, 7)
    monkeypatch.setattr(device_mod, "usable_cores", lambda: 64)
    assert loader_workers(gpu) == 16
    monkeypatch.setattr(device_mod, "usable_cores", lambda: 1)
    assert (loader_workers(cpu), loader_workers(gpu)) == (1, 1)
    assert (pin_memory(cpu), pin_memory(gpu)) == (False, True)


def test_loader_workers_share_the_machine_between_torchrun_ranks(monkeypatch):
    """8 ranks on a 32-core machine: 3 workers each (4 cores a rank, one for the rank itself), not 16 each."""
    monkeypatch.setattr(device_mod, "usable_cores", lambda: 32)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert loader_workers(torch.device("cuda", 0)) == 3
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "64")  # more ranks than cores: still one worker
    assert (loader_workers(torch.device("cuda", 0)), loader_workers(torch.device("cpu"))) == (1, 1)


def test_cli_commands_refuse_cuda_without_it_in_one_line(no_cuda, capsys, tmp_path):
    from polyvse_app.cli import main

    config = tmp_path / "c.yaml"
    config.write_text("name: c\n")
    assert main(["train", "--config", str(config), "--device", "cuda", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("polyvse: error: device 'cuda'") and "\n" not in err
    assert not (tmp_path / "o").exists()  # refused before any work
    assert main(["features", "extract", "--images", str(tmp_path), "--device", "cuda:1"]) == 2
    assert "device 'cuda:1'" in capsys.readouterr().err


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_train_cli_resolves_auto_precision_before_training(no_cuda, monkeypatch, tmp_path, native, expected):
    """`polyvse train --precision auto` hands the training loop what this machine computes natively."""
    import polyvse_train.train as train_mod
    from polyvse_app.cli import main

    class Reached(Exception):
        pass

    def fake_train(*args, precision, **kwargs):
        raise Reached(precision)

    monkeypatch.setattr(device_mod, "cpu_has_native_bf16", lambda *a, **k: native)
    monkeypatch.setattr(train_mod, "_train", fake_train)
    config = tmp_path / "c.yaml"
    config.write_text("name: c\n")
    with pytest.raises(Reached) as reached:
        main(
            [
                "train",
                "--config",
                str(config),
                "--device",
                "cpu",
                "--precision",
                "auto",
                "--out",
                str(tmp_path / "o"),
                "--quiet",
            ]
        )
    assert reached.value.args == (expected,)


# -- the model takes its inputs to its device ----------------------------------------------------------------
def tiny_model(**over) -> JointEmbeddingModel:
    cfg = dict(vocab_size=20, image_dim=8, embed_dim=6, word_dim=4, hidden_dim=5, text_encoder="mean")
    return JointEmbeddingModel(ModelConfig(**{**cfg, **over}))


def test_cpu_inputs_follow_a_model_on_the_meta_device():
    """meta stands in for a GPU: CPU tensors fed to a meta model would fail unless moved."""
    model = tiny_model().to("meta")
    assert model.device == torch.device("meta")
    image = model.encode_image_features(np.zeros((3, 8), np.float32))
    text = model.encode_text_ids(torch.tensor([[1, 2], [3, 0]]), torch.tensor([2, 1]))
    assert image.device.type == text.device.type == "meta"
    assert image.shape == (3, 6) and text.shape == (2, 6)


def fake_cuda():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


def test_fake_cuda_refuses_mixed_devices():
    """The check the next tests rely on: FakeTensorMode fails like a GPU on a CPU tensor in a CUDA op."""
    mode = fake_cuda()
    with mode, torch.device("cuda"):
        layer = torch.nn.Linear(8, 6)
    with mode, pytest.raises(Exception, match="device"):
        layer(torch.zeros(3, 8))


def test_forward_with_cpu_inputs_runs_on_fake_cuda():
    """Shared text encoder only: per-language parts pick rows with torch.unique, which fake tensors cannot run."""
    mode = fake_cuda()
    with mode, torch.device("cuda"):
        model = tiny_model()
    with mode:
        ids, lengths = torch.tensor([[1, 2, 3], [4, 5, 0], [6, 0, 0]]), torch.tensor([3, 2, 1])
        image, text = model(torch.zeros(3, 8), ids, lengths)
        scores = model.scores(image, text)
    assert image.device.type == text.device.type == scores.device.type == "cuda"


def test_vse_loss_runs_on_fake_cuda():
    """The trainer's batch -> loss path for objective vse (caption padding, feature rows, hinge) on fake CUDA
    tensors. Not covered: the tuple objectives, whose hinge counts its anchors with a data-dependent .sum()
    that fake tensors cannot run."""
    from types import SimpleNamespace

    from polyvse.distributed import DistInfo
    from polyvse.modules.text_input import CaptionEncoder
    from polyvse.text.vocab import Vocabulary
    from polyvse_train.config import TrainConfig
    from polyvse_train.objectives import build_objective

    class CpuPadding(CaptionEncoder):
        """Pads on real CPU tensors, as in training (fake tensors cannot size a padded batch)."""

        def pad(self, id_lists):
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():
                return CaptionEncoder.pad(id_lists)

    vocab = Vocabulary.build([["en:a", "en:dog", "de:ein", "de:hund"]])
    train = SimpleNamespace(
        photo_row=np.array([0, 0, 1, 1, 2]),
        langs=["en", "de", "en", "de", "en"],
        ids=[[1, 2], [3, 4], [2], [4, 3], [1]],
    )
    mode = fake_cuda()
    cfg = TrainConfig(objective="vse", languages=["en", "de"], embed_dim=6, word_dim=4, hidden_dim=5)
    with mode, torch.device("cuda"):
        model = tiny_model(vocab_size=len(vocab))
        data = SimpleNamespace(features=torch.zeros(3, 8), train=train, captions=CpuPadding(vocab))
        objective = build_objective(cfg, model, data)
    with mode:
        loss, _ = objective(model, [0, 2, 4], DistInfo(), epoch=0)
    assert loss.device.type == "cuda"


# -- checkpoints and training states across devices ------------------------------------------------------
@contextlib.contextmanager
def storages_tagged_cuda(monkeypatch):
    """torch.save records every storage as on cuda:0, as it does for tensors on a GPU."""
    import torch.serialization as ser

    monkeypatch.setattr(ser, "location_tag", lambda storage: "cuda:0")
    yield
    monkeypatch.undo()


def test_a_training_state_saved_on_a_gpu_loads_on_this_cpu(no_cuda, monkeypatch, tmp_path):
    from polyvse.model.checkpoint import load_training_state, save_training_state

    model = tiny_model()
    optimiser = torch.optim.Adam(model.parameters())
    model.encode_image_features(torch.ones(2, 8)).sum().backward()
    optimiser.step()
    path = tmp_path / "state.pt"
    with storages_tagged_cuda(monkeypatch):
        save_training_state({"model": model.state_dict(), "optimiser": optimiser.state_dict()}, path)
    if not torch.cuda.is_available():  # the file really says cuda: a plain load fails on a CPU-only machine
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(path, weights_only=False)
    state = load_training_state(path)
    fresh = tiny_model()
    fresh.load_state_dict(state["model"])
    fresh_opt = torch.optim.Adam(fresh.parameters())
    fresh_opt.load_state_dict(state["optimiser"])
    for a, b in zip(model.parameters(), fresh.parameters()):
        assert b.device.type == "cpu" and torch.equal(a, b)


def test_a_checkpoint_loads_on_the_requested_device_and_saves_cpu_tensors(tmp_path):
    """CPU -> another device: a checkpoint read on the CPU is moved onto the device asked for (meta here)."""
    from safetensors.torch import load_file

    from polyvse.model.checkpoint import Checkpoint, save_checkpoint
    from polyvse.model.loading import load
    from polyvse.model.torch_model import PolyvseModel
    from polyvse.modules.text_input import CaptionEncoder
    from polyvse.text.vocab import Vocabulary

    vocab = Vocabulary.build([["en:a", "en:dog"]])
    model = tiny_model(vocab_size=len(vocab))
    ckpt = Checkpoint(
        model=model,
        captions=CaptionEncoder(vocab),
        backbone="efficientnet-lite0",
        feature_key="k",
        ten_crop=False,
        languages=["en"],
    )
    save_checkpoint(ckpt, tmp_path / "c")
    assert {t.device.type for t in load_file(str(tmp_path / "c" / "model.safetensors")).values()} == {"cpu"}
    on_meta = load(tmp_path / "c", device=torch.device("meta"))
    assert on_meta.device == torch.device("meta") and on_meta.model.device == torch.device("meta")
    on_cpu = load(tmp_path / "c", device="cpu")
    got = on_cpu.encode_text(["a dog"], "en")
    assert isinstance(got, np.ndarray) and got.shape == (1, 6)
    assert PolyvseModel(ckpt).device == torch.device("cpu")  # no device given: where the weights are


def test_to_device_leaves_cpu_tensors_alone():
    x = torch.ones(2)
    assert to_device(x, torch.device("cpu")) is x


# -- exact search through torch (the GPU path), run on CPU tensors -----------------------------------------
def test_torch_exact_search_matches_faiss_across_chunks():
    import faiss

    from polyvse.index.store import torch_exact_topk

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((1000, 16)).astype(np.float32)
    queries = rng.standard_normal((5, 16)).astype(np.float32)
    flat = faiss.IndexFlatIP(16)
    flat.add(vectors)
    want_s, want_i = flat.search(queries, 10)
    got_s, got_i = torch_exact_topk(torch.from_numpy(vectors), queries, 10, chunk=64)  # 16 chunks to merge
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_allclose(got_s, want_s, rtol=1e-5, atol=1e-5)
    assert got_i.dtype == np.int64 and got_s.dtype == np.float32


def test_extractor_precision_changes_its_cache_key(two_fake_gpus):
    from polyvse.features.backbones import get_extractor

    ext = get_extractor("efficientnet-lite0")
    fp32_key = ext.key
    with pytest.raises(DeviceError):
        ext.to(torch.device("cpu"), "bf16")
    assert ext.key == fp32_key and ext.device == torch.device("cpu")
    ext.precision = "bf16"  # what ext.to(cuda, "bf16") sets
    assert ext.key == fp32_key + ".bf16"


def test_a_cuda_rank_joins_with_nccl_on_its_own_gpu(monkeypatch):
    """Simulated (no GPU, no process group): the calls init_distributed makes for a GPU rank are recorded."""
    import torch.distributed as dist

    from polyvse import distributed

    calls = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", d)))
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, timeout: calls.append(("backend", backend)))
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    info = distributed.init_distributed(torch.device("cuda", 1))
    assert calls == [("set_device", torch.device("cuda", 1)), ("backend", "nccl")]
    assert (info.rank, info.world_size, info.local_rank) == (1, 2, 1)
    calls.clear()
    distributed.init_distributed(torch.device("cpu"))
    distributed.init_distributed()
    assert calls == [("backend", "gloo"), ("backend", "gloo")]


def test_gpu_feature_extraction_computes_in_full_fp32(monkeypatch):
    """cuDNN runs fp32 convolutions in TF32 by default, which would put GPU features that differ from the CPU's
    under one cache key: the backbone runs with TF32 off on CUDA (fake CUDA: the device is only reported) and the
    settings come back afterwards."""
    import polyvse.features.extractor as extractor_mod
    from polyvse.features.extractor import FeatureExtractor, Preprocess

    seen = []

    class OnFakeGpu(FeatureExtractor):
        name, dim, ten_crop, weights_tag = "probe", 4, False, "none"
        preprocess = Preprocess(8, 8, (0.5,) * 3, (0.5,) * 3)
        model = torch.nn.Identity()

        @property
        def device(self):
            return torch.device("cuda", 0)

        def _pooled(self, x):
            seen.append((torch.backends.cudnn.conv.fp32_precision, torch.backends.cuda.matmul.fp32_precision))
            return x.flatten(1)[:, :4]

        def _head(self, features):
            return features

    monkeypatch.setattr(extractor_mod, "to_device", lambda x, device: x)  # the batch stays a CPU tensor
    before = (torch.backends.cudnn.conv.fp32_precision, torch.backends.cuda.matmul.fp32_precision)
    assert OnFakeGpu().forward_batch(torch.zeros(2, 3, 8, 8)).shape == (2, 4)
    assert seen == [("ieee", "ieee")]
    assert (torch.backends.cudnn.conv.fp32_precision, torch.backends.cuda.matmul.fp32_precision) == before


def test_features_extract_has_no_bf16_cache_that_training_never_reads(capsys, tmp_path):
    """Training reads fp32 features only; `features extract --precision bf16` filled a cache under a .bf16 key."""
    from polyvse_app.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["features", "extract", "--images", str(tmp_path), "--precision", "bf16"])
    assert stop.value.code == 2 and "unrecognized arguments: --precision bf16" in capsys.readouterr().err


def test_a_checkpoint_keyed_bf16_loads_on_a_cpu(no_cuda):
    """bf16 runs on CUDA only: on a CPU a model trained on bf16 features reads the fp32 features they approximate."""
    from polyvse.features.backbones import get_extractor
    from polyvse.model.checkpoint import Checkpoint
    from polyvse.model.torch_model import PolyvseModel
    from polyvse.modules.text_input import CaptionEncoder
    from polyvse.text.vocab import Vocabulary

    vocab = Vocabulary.build([["en:a"]])
    fp32_key = get_extractor("efficientnet-lite0").key
    ckpt = Checkpoint(
        model=tiny_model(vocab_size=len(vocab)),
        captions=CaptionEncoder(vocab),
        backbone="efficientnet-lite0",
        feature_key=fp32_key + ".bf16",
        ten_crop=False,
        languages=["en"],
    )
    ext = PolyvseModel(ckpt, device="cpu").extractor
    assert ext.precision == "fp32" and ext.key == fp32_key
    ckpt.feature_key = fp32_key.replace("lite0", "lite9") + ".bf16"  # another backbone's features stay refused
    with pytest.raises(Exception, match="trained on image features"):
        _ = PolyvseModel(ckpt, device="cpu").extractor


def test_training_extracts_missing_features_on_the_runs_device(monkeypatch, shared_data):
    """Rank 0 fills the feature cache before the other ranks go on: on a GPU run it does so on its GPU, with
    decoding workers for its share of the machine (not on the CPU with none, ~40 min from an empty cache)."""
    import polyvse.features.backbones as backbones
    import polyvse.features.cache as cache
    from polyvse_train.config import TrainConfig
    from polyvse_train.data import prepare_data

    seen = {}

    class Stop(Exception):
        pass

    real_get = backbones.get_extractor

    def get_extractor(*args, **kwargs):
        ext = real_get(*args, **kwargs)
        ext.to = lambda device, precision="fp32": seen.setdefault("to", device) and ext
        return ext

    def extract_features(paths, extractor, cache_dir, **kwargs):
        seen["workers"] = kwargs.get("num_workers")
        raise Stop

    monkeypatch.setattr(backbones, "get_extractor", get_extractor)
    monkeypatch.setattr(cache, "extract_features", extract_features)
    monkeypatch.setattr(device_mod, "usable_cores", lambda: 8)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    cfg = TrainConfig.from_dict({"dataset": "flickr8k", "languages": ["en"]})
    with pytest.raises(Stop):
        prepare_data(cfg, shared_data, smoke=True, progress=False, device=torch.device("cuda", 1))
    assert seen == {"to": torch.device("cuda", 1), "workers": 3}
    seen.clear()
    with pytest.raises(Stop):  # a CPU run: no move, no workers (the network already takes every core)
        prepare_data(cfg, shared_data, smoke=True, progress=False, device=torch.device("cpu"))
    assert seen == {"workers": 0}
