"""NPU graph capture on CPU, as far as torchair's aclgraph path (`_acl_concrete_graph/acl_graph.py`) uses it.

torch_npu's `NPUGraph` records the kernels a stream launches between `capture_begin` and `capture_end` and
`replay` launches them again on the same memory. Here a capture records every operator call that reaches the
dispatcher (a TorchDispatchMode), runs it on CPU once (shapes and buffers), and `replay` calls the recorded
operators again in order, writing each result into the buffer the capture gave it: the captured graph runs eagerly
on the captured memory, which is what an NPU replay computes. A `save_npugraph_tensor` during capture is recorded
and not run: on the NPU it launches a host function at replay, with the file path fixed at capture time
(`_save_npugraph_tensor_impl`), see `_save_op.py`.

Streams, events and the memory pool are bookkeeping without effect on CPU (torchair's own system tests stub them
the same way: `tests/st/torchair_st_stub_aclgraph_utils.py` in the torchair repository).
"""

from __future__ import annotations

import contextlib
import itertools

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

_pool_ids = itertools.count(1)
_capturing: list = []  # the NPUGraph whose capture is running (at most one)
_storages: dict = {}  # data_ptr -> untyped storage of every tensor a capture saw (torch_npu's memory pool)


def _note_storages(values) -> None:
    for value in tree_flatten(values)[0]:
        if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.untyped_storage().nbytes():
            _storages[value.untyped_storage().data_ptr()] = value.untyped_storage()


def storage_at(data_ptr: int, nbytes: int):
    """The storage whose memory starts at data_ptr (torch_npu builds a storage over that device memory)."""
    storage = _storages.get(data_ptr)
    if storage is None:
        import gc

        for obj in gc.get_objects():  # a user input the capture has not seen yet
            try:
                is_cpu_tensor = isinstance(obj, torch.Tensor) and obj.device.type == "cpu"
            except ReferenceError:  # a weakref proxy whose object is gone (gc lists those too)
                continue
            if is_cpu_tensor and obj.untyped_storage().data_ptr() == data_ptr:
                storage = obj.untyped_storage()
                _storages[data_ptr] = storage
                break
    if storage is None or storage.nbytes() < nbytes:
        if nbytes == 0:
            return torch.UntypedStorage(0)
        raise RuntimeError(f"stand-in: no live CPU storage of {nbytes} bytes at {data_ptr:#x}")
    return storage


class _Recorder(TorchDispatchMode):
    # higher-order operators (the catalogue's custom_dict) are recorded and replayed as one call, as operators are
    supports_higher_order_operators = True

    def __init__(self, graph: NPUGraph) -> None:
        super().__init__()
        self.graph = graph

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        from .._save_op import is_save_op, save_at_replay

        if is_save_op(func):
            self.graph.steps.append(("save", save_at_replay(func, args, kwargs)))
            return None
        out = func(*args, **kwargs)
        _note_storages((args, kwargs, out))
        if not getattr(func, "is_view", False):  # a view shares its base's memory: replaying the base updates it
            self.graph.steps.append(("op", (func, args, kwargs, out)))
        return out


def _write_into(recorded, fresh) -> None:
    if isinstance(recorded, torch.Tensor) and isinstance(fresh, torch.Tensor):
        if recorded is not fresh and recorded.numel():
            recorded.copy_(fresh)
    elif isinstance(recorded, (list, tuple)) and isinstance(fresh, (list, tuple)):
        for r, f in zip(recorded, fresh):
            _write_into(r, f)
    elif isinstance(recorded, dict) and isinstance(fresh, dict):  # a higher-order operator's mapping
        for key, r in recorded.items():
            _write_into(r, fresh[key])


class NPUGraph:
    def __init__(self) -> None:
        self.steps: list = []
        self._mode = None

    def capture_begin(self, pool=None, capture_error_mode="global"):
        self.steps = []
        self._mode = _Recorder(self)
        self._mode.__enter__()
        _capturing.append(self)

    def capture_end(self):
        _capturing.remove(self)
        self._mode.__exit__(None, None, None)
        self._mode = None

    def replay(self):
        for kind, step in self.steps:
            if kind == "save":
                step()
                continue
            func, args, kwargs, out = step
            _write_into(out, func(*args, **kwargs))

    def reset(self):
        self.steps = []

    def pool(self):
        return (0, next(_pool_ids))

    def debug_dump(self, path):
        pass


class graph:
    def __init__(self, npu_graph, pool=None, stream=None, capture_error_mode: str = "global"):
        self.npu_graph = npu_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode

    def __enter__(self):
        self.npu_graph.capture_begin(self.pool, self.capture_error_mode)

    def __exit__(self, exc_type, exc_value, traceback):
        self.npu_graph.capture_end()


def is_current_stream_capturing() -> bool:
    return bool(_capturing)


def graph_pool_handle():
    return (next(_pool_ids), 0)


class Stream:
    _ids = itertools.count()

    def __init__(self, device=None, priority=0, **kwargs) -> None:
        self.stream_id = next(Stream._ids)
        self.device_index = 0

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self, event=None):
        return event or Event()

    def synchronize(self):
        pass


_default_stream = Stream()


class Event:
    def __init__(self, *args, **kwargs) -> None:
        pass

    def record(self, stream=None):
        pass

    def wait(self, stream=None):
        pass

    def reset(self, stream=None):
        pass

    def synchronize(self):
        pass


ExternalEvent = Event


def current_stream(device=None):
    return _default_stream


def set_stream(stream):
    pass


@contextlib.contextmanager
def stream(stream=None):
    yield


def synchronize(device=None):
    pass


def empty_cache():
    pass


def get_stream_limit(stream):
    return {"cube_core_num": 24, "vector_core_num": 48}


def set_stream_limit(stream, cube_num, vector_num):
    pass


def memory_snapshot():
    return []


def graph_task_group_begin(stream):
    raise NotImplementedError("stand-in: graph task update (ops with updated parameters) is not modelled")


graph_task_group_end = graph_task_update_begin = graph_task_update_end = graph_task_group_begin
