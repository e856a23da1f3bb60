"""`torch_npu.npu` as far as torchair reads it (device id, device name, hf32 and determinism switches)."""

from types import SimpleNamespace

from . import utils  # noqa: F401

matmul = SimpleNamespace(allow_hf32=False)
conv = SimpleNamespace(allow_hf32=True)


def current_device():
    return 0


def get_device_name(device=None):
    return "Ascend910B1"


def _get_deterministic_level():
    return 0


def is_available():
    return False
