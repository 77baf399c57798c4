"""Where computation runs: one ``--device`` setting (auto | cpu | cuda | cuda:N) and one precision setting.

    device = resolve_device("auto")           # cuda when torch sees a GPU, else cpu
    with autocast(device, "bf16"): ...        # bf16 autocast on CUDA (a CPU: training steps); fp32: no-op

Every command and the Python API (``polyvse.load(path, device=...)``) resolve the device here, so asking
for CUDA where there is none fails the same way everywhere: one line naming the setting and what to do.
Under ``torchrun`` ``auto`` and ``cuda`` mean this rank's own GPU, ``cuda:$LOCAL_RANK``; with several ranks an
explicit ``cuda:N`` other than that is an error, since ranks sharing one GPU make NCCL fail.

bf16 is opt-in, and fp32 stays the default everywhere. Features (photo maps, the cached inputs of training) are
computed in bf16 on CUDA only: on CPU it moved EfficientNet features (min cosine 0.995 to fp32; README,
Performance), and a feature cache must not depend on the machine that filled it. A training step may run under
bf16 autocast on either (``check_precision(..., training=True)``): it reads the same fp32 caches, and on a CPU
with native bf16 (AVX512_BF16 / AMX) its matmuls and 1x1 convolutions run about twice as fast; whether the
result is as good is a recipe question, measured on val (docs/methods/f8k-full.md). ``auto``
(:func:`training_precision`) picks bf16 for training where the hardware computes it natively (a CUDA GPU with
bf16, a CPU with AVX512_BF16 or AMX) and fp32 elsewhere: on a CPU without them bf16 is emulated, slower than fp32.
"""

from __future__ import annotations

import contextlib
import os

import torch

from .errors import PolyvseError

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
PRECISIONS = ("fp32", "bf16")
TRAINING_PRECISIONS = ("fp32", "bf16", "auto")
# /proc/cpuinfo flags of x86 CPUs that compute bf16 dot products in hardware
_CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


class DeviceError(PolyvseError, ValueError):
    """A device or precision this machine cannot provide, or a malformed device name."""


def cuda_available() -> bool:
    """torch sees a usable CUDA device (one place to monkeypatch in tests)."""
    return torch.cuda.is_available()


def resolve_device(spec: str | torch.device | None = "auto", *, local_rank: int | None = None) -> torch.device:
    """``auto`` | ``cpu`` | ``cuda`` | ``cuda:N`` (or a torch.device) -> torch.device, checked against this machine.

    ``local_rank`` (default: $LOCAL_RANK, set by torchrun) picks the GPU for ``auto`` and ``cuda``. Under a
    torchrun run of several ranks (WORLD_SIZE > 1) ``cuda:N`` must be this rank's GPU: every rank launched with the
    same ``cuda:N`` would land on one GPU. A torch.device of another type (meta, mps, ...) is taken as it is: the
    Python API may ask for one.
    """
    if isinstance(spec, torch.device):
        if spec.type not in ("cpu", "cuda"):
            return spec
        spec = str(spec)
    text = (spec or "auto").strip().lower()
    if text == "auto":
        if not cuda_available():
            return torch.device("cpu")
        text = "cuda"
    if text == "cpu":
        return torch.device("cpu")
    if text == "cuda" or text.startswith("cuda:"):
        index = _cuda_index(text, local_rank)
        if not cuda_available():
            raise DeviceError(
                f"device {spec!r}: torch sees no CUDA GPU on this machine (torch {torch.__version__}, "
                f"built for CUDA {torch.version.cuda or 'none'}); use --device cpu or auto"
            )
        count = torch.cuda.device_count()
        if index >= count:
            ranks = (
                f" (LOCAL_RANK {index} of torchrun: start at most {count} ranks per machine, --nproc-per-node)"
                if text == "cuda" and torchrun_world_size() > 1
                else ""
            )
            raise DeviceError(f"device {spec!r}: this machine has {count} CUDA GPU(s), numbered 0..{count - 1}{ranks}")
        return torch.device("cuda", index)
    raise DeviceError(f"device {spec!r}: use {DEVICE_CHOICES}")


def torchrun_world_size() -> int:
    """Processes of the torchrun run this one belongs to (1 outside torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def _cuda_index(text: str, local_rank: int | None) -> int:
    rank = int(os.environ.get("LOCAL_RANK", "0")) if local_rank is None else int(local_rank)
    if text == "cuda":
        return rank
    try:
        index = int(text.split(":", 1)[1])
    except ValueError:
        index = -1
    if index < 0:
        raise DeviceError(f"device {text!r}: write cuda:N with N a GPU number, e.g. cuda:0")
    if torchrun_world_size() > 1 and index != rank:
        # every rank gets the same command line, so a fixed number puts them all on one GPU and NCCL fails
        raise DeviceError(
            f"device {text!r} under torchrun with {torchrun_world_size()} ranks: this rank "
            f"(LOCAL_RANK {rank}) would share GPU {index} with the others; use --device cuda or auto, "
            "which give each rank its own GPU (cuda:$LOCAL_RANK)"
        )
    return index


def check_precision(precision: str, device: torch.device, *, training: bool = False) -> str:
    """``fp32`` anywhere; ``bf16`` (autocast) on CUDA, and on a CPU for a training step (``training``), whose
    inputs are the fp32 caches, but not for features, which fill those caches."""
    if precision not in PRECISIONS:
        raise DeviceError(f"precision {precision!r}: use {' or '.join(PRECISIONS)}")
    if precision == "bf16" and device.type not in ("cuda", "cpu"):
        raise DeviceError(f"precision bf16 runs on CUDA or the CPU, not on {device}; use --precision fp32")
    if precision == "bf16" and device.type == "cpu" and not training:
        raise DeviceError(
            f"precision bf16 computes features on CUDA only, not on {device}: on CPU it changed "
            "image features (min cosine 0.995 to fp32); use --precision fp32"
        )
    return precision


def cpu_has_native_bf16(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> bool:
    """Whether this CPU computes bf16 in hardware (AVX512_BF16 or AMX flags in ``cpuinfo``); False where the
    file is absent (not Linux) or names neither."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags") and _CPU_BF16_FLAGS & set(line.split(":", 1)[-1].split()):
                    return True
    except OSError:
        return False
    return False


def training_precision(spec: str, device: torch.device, *, cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> str:
    """``fp32`` | ``bf16`` | ``auto`` -> the precision of training steps on ``device``. ``auto``: bf16 on a GPU
    that supports it and on a CPU with native bf16 (:func:`cpu_has_native_bf16`), fp32 elsewhere."""
    if spec not in TRAINING_PRECISIONS:
        raise DeviceError(f"precision {spec!r}: use {', '.join(TRAINING_PRECISIONS)}")
    if spec == "auto":
        if device.type == "cuda":
            spec = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        elif device.type == "cpu":
            spec = "bf16" if cpu_has_native_bf16(cpuinfo) else "fp32"
        else:
            spec = "fp32"
    return check_precision(spec, device, training=True)


def autocast(device: torch.device, precision: str = "fp32", *, training: bool = False):
    """bf16 autocast on ``device`` for ``precision='bf16'`` (on a CPU for a training step only, as
    :func:`check_precision` says); a no-op context for fp32."""
    if check_precision(precision, device, training=training) == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


@contextlib.contextmanager
def autocast_off(device: torch.device):
    """Ops inside run in their inputs' dtype even within bf16 autocast (the caller upcasts them): for the logits
    of a softmax at a low temperature, where bf16's 3 significant digits would move each logit by ~0.05."""
    if device.type not in ("cpu", "cuda"):  # autocast knows no other device types (meta)
        yield
        return
    with torch.autocast(device_type=device.type, enabled=False):
        yield


@contextlib.contextmanager
def ieee_fp32(device: torch.device):
    """fp32 convolutions and matmuls computed in full fp32 on CUDA (a no-op elsewhere). cuDNN's default runs fp32
    convolutions in TF32 (a 10-bit mantissa), so GPU features would differ from the CPU's cached under the same key."""
    if device.type != "cuda":
        yield
        return
    backends = (torch.backends.cudnn.conv, torch.backends.cuda.matmul)
    saved = [b.fp32_precision for b in backends]
    for b in backends:
        b.fp32_precision = "ieee"
    try:
        yield
    finally:
        for b, value in zip(backends, saved):
            b.fp32_precision = value


def to_device(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``x`` on ``device``; the host-to-GPU copy does not block when ``x`` is in pinned memory."""
    return x.to(device, non_blocking=x.device.type == "cpu" and device.type == "cuda")


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def ranks_on_this_machine() -> int:
    """torchrun's processes on this machine ($LOCAL_WORLD_SIZE), 1 outside torchrun: they share its cores."""
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def loader_workers(device: torch.device) -> int:
    """Photo-decoding DataLoader workers for feature extraction on ``device``, out of this process's share of the
    machine's cores (under torchrun every rank on a machine starts its own workers).

    CPU: at most 2 (the network already uses every core; on 2 cores 0 and 2 workers ran alike, ~37 photos/s).
    CUDA: every core of the share but one (the GPU outruns decoding, so decoding is the bound), at most 16.
    """
    cores = max(1, usable_cores() // ranks_on_this_machine())
    if device.type == "cuda":
        return max(1, min(16, cores - 1))
    return min(2, cores)


def pin_memory(device: torch.device) -> bool:
    """Batches bound for a GPU go through pinned (page-locked) memory, so their copy can overlap compute."""
    return device.type == "cuda"


def module_device(module: torch.nn.Module) -> torch.device:
    """The device of a module's first parameter or buffer (cpu for a module with neither)."""
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")
