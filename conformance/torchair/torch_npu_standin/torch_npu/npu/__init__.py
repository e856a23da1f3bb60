"""`torch_npu.npu` as far as torchair reads it (device id, device name, hf32 and determinism switches; the graph
capture, streams and events of its aclgraph path: graphs.py)."""

from types import SimpleNamespace

from . import utils  # noqa: F401
from .graphs import (  # noqa: F401 — torch_npu.npu's names
    Event,
    ExternalEvent,
    NPUGraph,
    Stream,
    current_stream,
    empty_cache,
    get_stream_limit,
    graph,
    graph_pool_handle,
    graph_task_group_begin,
    graph_task_group_end,
    graph_task_update_begin,
    graph_task_update_end,
    is_current_stream_capturing,
    memory_snapshot,
    set_stream,
    set_stream_limit,
    stream,
    synchronize,
)

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
