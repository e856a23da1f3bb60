"""Stand-in for torchair's compiled `torchair/core/_torchair` extension (CANN's GE session and graph executor).

On an NPU host this module is C++: it initialises the Graph Engine, registers GE IR definitions, loads the
serialized GE graph and runs it on the device. Here it is the only seam between torchair's Python code and a
missing device: everything torchair computes in Python (FX passes, the FX→GE conversion, the graph dumps, the FX
data dumper) runs unchanged. What reaches this module is recorded, and the graph run is delegated to the
executor the harness installs (`EXECUTOR`), which interprets the serialized GE graph on the host.
"""

from __future__ import annotations

import enum

# Set by the harness (capture/executor.py) before a compiled model runs; None makes a GE run fail loudly.
EXECUTOR = None

# What torchair asked of GE, in order: (function, argument) — the harness reports it when a run fails.
CALLS: list = []


class TorchDataType(enum.IntEnum):
    """Values only serve as dictionary keys in torchair's Python code (llm_datadist); they are never sent to GE."""

    BOOL = 0
    UINT8 = 1
    INT8 = 2
    INT16 = 3
    UINT16 = 4
    INT32 = 5
    UINT32 = 6
    INT64 = 7
    UINT64 = 8
    BF16 = 9
    FLOAT16 = 10
    FLOAT32 = 11
    FLOAT64 = 12
    COMPLEX64 = 13
    COMPLEX128 = 14


def InitializeGraphEngine(options):
    CALLS.append(("InitializeGraphEngine", dict(options)))


def FinalizeGraphEngine():
    CALLS.append(("FinalizeGraphEngine", None))


def SetDebugLogPath(path):
    CALLS.append(("SetDebugLogPath", path))


def StupidRepeat(word, times):
    return word * times


def InitDeviceStdoutChannel(device_id):
    CALLS.append(("InitDeviceStdoutChannel", device_id))


def GetSocName():
    return "Ascend910B1"


def get_registered_ir_def(op_type):
    """GE's IR registry is C++ (CANN's op proto libraries). "ERROR" = not registered: torchair then uses its own
    Python converters (every op the catalogue uses has one) instead of generating a converter from the IR."""
    return "ERROR", [], [], []


def check_cann_compat(op_type, runtime_optional_inputs, runtime_optional_attrs):
    """'' = the installed CANN supports the optional inputs/attributes a converter uses (no CANN here to ask)."""
    return ""


class TorchNpuGraphBase:
    """The GE graph executor. `load` receives exactly the graph GE would compile and run (serialized ModelDef);
    `run` hands it with the inputs to the harness's executor."""

    def __init__(self, name=""):
        self.name = str(name)
        self.serialized_model = None
        self.load_options = None

    def load(self, serialized_model, options, input_placements, output_dtypes, executor_type):
        self.serialized_model = bytes(serialized_model)
        self.load_options = dict(options)
        CALLS.append(("load", self.name))

    def set_hint_shape(self, inputs_shape, outputs_shape):
        CALLS.append(("set_hint_shape", self.name))

    def compile(self):
        CALLS.append(("compile", self.name))

    def auto_tune(self, args):
        raise NotImplementedError("auto_tune needs CANN's AOE; the conformance harness never enables it")

    def run(self, args):
        inputs, assigned_outputs, _stream = args
        if EXECUTOR is None:
            raise RuntimeError(f"GE graph {self.name} cannot run: GE is stubbed and no harness executor is installed")
        return EXECUTOR.run(self, list(inputs), list(assigned_outputs))


def _unavailable(name):
    def fail(*args, **kwargs):
        raise NotImplementedError(f"torchair.core._torchair.{name} needs CANN; the conformance harness never calls it")

    return fail


export = _unavailable("export")
as_torch_tensors = _unavailable("as_torch_tensors")


def AclmdlSetDump(path):
    # torchair 2.14's _set_dump_options_json hands GE the dump options file it wrote; the harness's GE side reads
    # that file (harness/dump_scope.py)
    CALLS.append(("AclmdlSetDump", path))
    return 0


AclopStartDumpArgs = _unavailable("AclopStartDumpArgs")
AclopStopDumpArgs = _unavailable("AclopStopDumpArgs")
