"""The faults the end-to-end dumps carry (test_compare_e2e, the HTML report's browser tests): one of every kind the
compare must tell apart — a relative error, NaN, a shape change, inf, a truncated file, a corrupt header."""

from tcmp.schemas.synth.faults import Fault, FaultKind

FAULTS = (
    Fault("layers.1/MatMul_1", FaultKind.REL_ERROR, tokens=(1,)),
    Fault("SoftmaxV2_0", FaultKind.NAN),
    Fault("ConcatV2_big", FaultKind.SHAPE, tokens=(0,)),
    Fault("layers.1/Add_1_1", FaultKind.INF, tokens=(0,)),
    Fault("Gelu_0", FaultKind.TRUNCATE, tokens=(0,)),
    Fault("layers.1/Cast_1", FaultKind.CORRUPT_HEADER, tokens=(1,)),
)
