"""The embedded protobuf descriptors are the .proto files, and carry the writers' field numbers (docs/formats.md,
"The header", "Graph text structure")."""

from __future__ import annotations

from google.protobuf import descriptor_pb2

from tcmp.schemas import proto
from tcmp.schemas.proto import generate
from tcmp.schemas.proto.descriptors import FILE_DESCRIPTOR_SET


def test_embedded_descriptors_match_the_proto_files():
    fresh = descriptor_pb2.FileDescriptorSet.FromString(generate.compile_descriptor_set())
    embedded = descriptor_pb2.FileDescriptorSet.FromString(FILE_DESCRIPTOR_SET)
    assert fresh == embedded, "run `python -m tcmp.schemas.proto.generate` after editing a .proto file"


def _numbers(message) -> dict[str, int]:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}


def test_dump_data_field_numbers_follow_the_spec():
    assert _numbers(proto.DumpData) == {
        "version": 1, "dump_time": 2, "output": 3, "input": 4, "buffer": 5, "op_name": 6, "attr": 7, "space": 8,
        "dfx_message": 9,
    }  # fmt: skip
    out = _numbers(proto.OpOutput)
    assert (out["data_type"], out["format"], out["shape"], out["original_op"], out["size"]) == (1, 2, 3, 4, 6)
    assert (out["original_shape"], out["sub_format"]) == (7, 8)
    inp = _numbers(proto.OpInput)
    assert (inp["data_type"], inp["format"], inp["shape"], inp["size"], inp["original_shape"]) == (1, 2, 3, 5, 6)
    assert inp["sub_format"] == 7


def test_shape_dims_accept_packed_and_unpacked_encodings():
    # field 3 (shape) of OpOutput holding Shape.dim = [2, 3]: unpacked (tag 0x08 per value) and packed (0x0a)
    unpacked = b"\x1a\x04\x08\x02\x08\x03"
    packed = b"\x1a\x04\x0a\x02\x02\x03"
    for wire in (unpacked, packed):
        assert list(proto.OpOutput.FromString(wire).shape.dim) == [2, 3]


def test_enums_are_plain_integers_so_unknown_values_survive():
    message = proto.OpOutput(data_type=77, format=54, sub_format=-3)
    again = proto.OpOutput.FromString(message.SerializeToString())
    assert (again.data_type, again.format, again.sub_format) == (77, 54, -3)


def test_graph_def_field_numbers():
    assert _numbers(proto.GraphDef)["op"] == 6 and _numbers(proto.GraphDef)["attr"] == 11
    op = _numbers(proto.OpDef)
    assert (op["name"], op["type"], op["input"], op["attr"], op["input_desc"], op["output_desc"]) == (
        1, 2, 5, 10, 33, 34,
    )  # fmt: skip
