"""Stand-in for torchair's compiled `torchair/core/_npu_graph_executor` (device storage queries).

torchair's Python code asks it one thing: the storage (device-format) sizes of an NPU tensor with an internal
format. The harness runs on CPU tensors, which never carry an internal format, so that call cannot happen.
"""


def GetNpuStorageSizes(tensor):
    raise NotImplementedError("GetNpuStorageSizes applies to NPU tensors with an internal format; there are none here")
