"""Stand-in for torchair's compiled `torchair/core/_npu_utils` (torchair 2.14; absent in older wheels).

Its one Python caller is `torchair.experimental.inference.npu_format_cast_via_cpu`, which converts a weight to a
device format through CANN. The catalogue never uses it.
"""


def NpuFormatCastViaCpu(*args, **kwargs):
    raise NotImplementedError("NpuFormatCastViaCpu needs CANN; the conformance harness never calls it")
