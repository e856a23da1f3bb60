"""`torch_npu._C` as far as torchair's aclgraph path calls it: tensors over captured memory, the pool state."""

import torch

from .npu.graphs import storage_at


def _construct_storage_from_data_pointer(data_ptr, device, nbytes):
    # torch_npu builds a storage over that device memory; on CPU it is the live storage starting there
    return storage_at(data_ptr, nbytes)


def _construct_NPU_Tensor_From_Storage_And_Metadata(metadata, storage):
    tensor = torch.empty(0, dtype=metadata["dtype"], device="cpu")
    return tensor.set_(storage, metadata["storage_offset"], metadata["size"], metadata["stride"])


def _npu_getCheckpointState(device, pool):
    return ("checkpoint", device, pool)


def _npu_setCheckpointPoolState(device, state, stale_storages, storages_to_add_deleters_to):
    pass
