"""Protobuf message classes for the GE dump header and the GE IR graph text files.

Built at import time from the embedded FileDescriptorSet (see `generate.py` for why), in a private descriptor
pool so tcmp never collides with CANN's or torchair's own registrations of same-named messages.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tcmp.schemas.proto.descriptors import FILE_DESCRIPTOR_SET

_POOL = descriptor_pool.DescriptorPool()
for _file in descriptor_pb2.FileDescriptorSet.FromString(FILE_DESCRIPTOR_SET).file:
    _POOL.AddSerializedFile(_file.SerializeToString())


def _message_class(full_name: str):
    descriptor = _POOL.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
        return message_factory.GetMessageClass(descriptor)
    # protobuf < 4.22 only, which types-protobuf (of a newer release) does not describe
    return message_factory.MessageFactory(_POOL).GetPrototype(descriptor)  # type: ignore[attr-defined, unused-ignore]  # pragma: no cover


DumpData = _message_class("tcmp.dump.DumpData")
OpInput = _message_class("tcmp.dump.OpInput")
OpOutput = _message_class("tcmp.dump.OpOutput")
GraphDef = _message_class("tcmp.ge_ir.GraphDef")
OpDef = _message_class("tcmp.ge_ir.OpDef")
ModelDef = _message_class("tcmp.ge_ir.ModelDef")
GE_IR_DATA_TYPE = _POOL.FindEnumTypeByName("tcmp.ge_ir.DataType")

__all__ = ["GE_IR_DATA_TYPE", "DumpData", "GraphDef", "ModelDef", "OpDef", "OpInput", "OpOutput"]
