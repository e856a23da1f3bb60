"""Capture helpers against a STAND-IN for torchair's CompilerConfig (torch_npu cannot be installed here).

The stand-in reproduces the attribute paths of torchair's configs (configs/compiler_config.py, dump_config.py,
debug_config.py, fusion_config.py) and the behaviour that matters: options are fixed attributes (a typo raises, as
NpuBaseConfig.__setattr__ does), option values are checked against the same allowed lists and regexes, dump_path
must be an existing directory, fusion_switch_file an existing file. It is not torchair.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import types

import pytest

from tcmp.daemon.capture import (
    FUSION_OFF,
    CaptureUnavailable,
    DumpMode,
    OpNameFilter,
    enable_fx_dump,
    enable_ge_dump,
    format_steps,
    load_torchair,
    npu_backend,
    write_fusion_off_switch,
)
from tcmp.schemas.dump_tree import FX_ROOT_NAMES, GE_ROOT_NAMES


class _Options:
    """Stand-in for NpuBaseConfig: only declared options may be set, each through its validator."""

    def __init__(self, validators, **defaults) -> None:
        object.__setattr__(self, "_validators", validators)
        object.__setattr__(self, "_values", dict(defaults))

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name not in values:
            raise AttributeError(name)
        return values[name]

    def __setattr__(self, name, value) -> None:
        if name not in self._values:
            raise ValueError(f"{type(self).__name__} has no option {name}")
        check = self._validators.get(name)
        if check is not None:
            check(value)
        self._values[name] = value


def _one_of(*allowed):
    def check(value):
        if value not in allowed:
            raise ValueError(f"{value!r} not in {allowed}")

    return check


def _regex(pattern):
    def check(value):
        if not re.match(pattern, value):
            raise ValueError(f"{value!r} does not match {pattern}")

    return check


def _existing_dir(value):
    if not os.path.isdir(value):
        raise FileNotFoundError(value)


def _existing_file(value):
    if value is not None and not os.path.isfile(value):
        raise FileNotFoundError(value)


class StandInCompilerConfig:
    """STAND-IN for torchair.CompilerConfig: the attribute paths the capture helpers set, with torchair's checks."""

    def __init__(self) -> None:
        self.dump_config = _Options(
            {
                "enable_dump": _one_of(False, True),
                "dump_path": _existing_dir,
                "dump_mode": _one_of("input", "output", "all"),
                "dump_step": _regex(r"^(((\d+)|(\d+-{0,1}\d+))\|{0,1})*$"),
                "dump_layer": _regex(r'^[0-9a-zA-Z_" "/\\.]*$'),
            },
            enable_dump=False, dump_path="./", dump_mode="all", quant_dumpable=False, dump_step="", dump_layer="",
            dump_data="tensor",
        )  # fmt: skip
        self.debug = _Options({}, graph_dump=None, data_dump=None, fx_summary=None)
        self.debug.graph_dump = _Options({"type": _one_of(None, "txt", "pbtxt", "py")}, type=None, path=None)
        self.debug.data_dump = _Options({"type": _one_of(None, "npy")}, type=None, path=None, filter=None)
        self.fusion_config = _Options({"fusion_switch_file": _existing_file}, fusion_switch_file=None)


def test_ge_dump_config_targets_the_layout_tcmp_reads(tmp_path):
    config = enable_ge_dump(tmp_path / "run", mode=DumpMode.OUTPUT, steps=[0, 1, (3, 5)], layers=["Mul_1", "Add1"],
                            config=StandInCompilerConfig())  # fmt: skip
    dump_dir = tmp_path / "run" / "msprobe_ge_dump"
    assert dump_dir.name in GE_ROOT_NAMES and dump_dir.is_dir()
    dump = config.dump_config
    assert (dump.enable_dump, dump.dump_path, dump.dump_mode) == (True, str(dump_dir), "output")
    assert (dump.dump_step, dump.dump_layer) == ("0|1|3-5", "Mul_1 Add1")
    assert (config.debug.graph_dump.type, config.debug.graph_dump.path) == ("txt", str(dump_dir))
    assert config.fusion_config.fusion_switch_file is None


def test_fusion_off_writes_the_switch_file_and_uses_it(tmp_path):
    config = enable_ge_dump(tmp_path, fusion_off=True, config=StandInCompilerConfig())
    switch = tmp_path / "fusion_off.json"
    assert config.fusion_config.fusion_switch_file == str(switch)
    assert json.loads(switch.read_text()) == {"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}
    assert json.loads(write_fusion_off_switch(tmp_path / "x" / "f.cfg").read_text()) == FUSION_OFF
    with pytest.raises(ValueError, match="not both"):
        enable_ge_dump(tmp_path, fusion_off=True, fusion_switch_file=switch, config=StandInCompilerConfig())


def test_fx_dump_config_and_its_op_filter(tmp_path):
    config = enable_fx_dump(tmp_path, ops=["mm", "softmax"], config=StandInCompilerConfig())
    data_dump = config.debug.data_dump
    assert (data_dump.type, data_dump.path) == ("npy", str(tmp_path / "msprobe_fx_dump"))
    assert (tmp_path / "msprobe_fx_dump").name in FX_ROOT_NAMES
    node = type("Node", (), {"name": "mm_3"})()
    other = type("Node", (), {"name": "add_1"})()
    assert isinstance(data_dump.filter, OpNameFilter)
    assert data_dump.filter(node) is node and data_dump.filter(other) is None

    def mine(n):
        return n

    assert enable_fx_dump(tmp_path, ops=mine, config=StandInCompilerConfig()).debug.data_dump.filter is mine


@pytest.mark.parametrize(("steps", "text"), [([0], "0"), ([2, (4, 4), (5, 9)], "2|4-4|5-9"), ([], "")])
def test_format_steps(steps, text):
    assert format_steps(steps) == text


def test_bad_steps_and_layers_are_refused_before_torchair_sees_them(tmp_path):
    for steps in ([-1], [(5, 2)]):
        with pytest.raises(ValueError, match="step"):
            format_steps(steps)
    with pytest.raises(ValueError, match="dump_layer"):
        enable_ge_dump(tmp_path, layers=["op;rm"], config=StandInCompilerConfig())


def test_without_torch_npu_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # import fails even where torch_npu is installed
    with pytest.raises(CaptureUnavailable, match=r"need torch_npu, which ships torchair.*tcmp\[npu\]"):
        load_torchair()
    with pytest.raises(ImportError):
        enable_fx_dump(tmp_path)


# --- FX stacks (npu_backend) ------------------------------------------------------------------------------------


class _Node:
    def __init__(self, name, target, stack=None) -> None:
        self.name, self.target = name, target
        self.meta = {"stack_trace": stack} if stack is not None else {}


class _Gm:
    def __init__(self, *nodes) -> None:
        self.graph = type("Graph", (), {"nodes": list(nodes)})()


def _stand_in_torchair(monkeypatch):
    """STAND-IN for torchair's backend path, as both 2.5.1 and 2.14 have it (npu_fx_compiler.py): get_npu_backend
    returns a partial of _npu_backend, which asks the module's `get_compiler` for its compiler at each call; the
    compiler counts graphs in `_GLOBAL_GRAPH_ID` (the GE graph's `graph_N`)."""
    compiler_module = types.ModuleType("torchair.npu_fx_compiler")
    compiler_module._GLOBAL_GRAPH_ID = 0
    compiled = []

    class NpuFxCompiler:
        def __init__(self, config) -> None:
            self.config = config

        def set_arg_pos_to_source(self, value):
            return ("set", value)

        def __call__(self, gm, example_inputs):
            compiler_module._GLOBAL_GRAPH_ID += 1
            compiled.append(gm)
            return f"graph_{compiler_module._GLOBAL_GRAPH_ID}"

    def get_compiler(config):
        return NpuFxCompiler(config)

    def _npu_backend(gm, example_inputs, compiler_config=None):
        compiler = compiler_module.get_compiler(compiler_config)  # looked up at call time, as torchair does
        assert compiler.set_arg_pos_to_source(1) == ("set", 1)
        return compiler(gm, example_inputs)

    compiler_module.get_compiler = get_compiler
    torchair = types.ModuleType("torchair")
    torchair.npu_fx_compiler = compiler_module
    torchair.get_npu_backend = lambda compiler_config=None: functools.partial(
        _npu_backend, compiler_config=compiler_config
    )
    monkeypatch.setitem(sys.modules, "torchair.npu_fx_compiler", compiler_module)
    return torchair, compiled


def test_npu_backend_records_each_compiled_graphs_stacks_beside_the_graph_dump(tmp_path, monkeypatch):
    torchair, compiled = _stand_in_torchair(monkeypatch)
    original = torchair.npu_fx_compiler.get_compiler
    config = enable_ge_dump(tmp_path, config=StandInCompilerConfig())
    backend = npu_backend(config, torchair=torchair)
    first = _Gm(_Node("arg0_1", "arg0_1"), _Node("add", "aten.add.Tensor", "File m.py, line 3"),
                _Node("output", "output"))  # fmt: skip
    second = _Gm(_Node("add", "aten.add.Tensor", "File m.py, line 9"), _Node("mul", "aten.mul.Tensor", "line 10"))
    assert backend(first, []) == "graph_1" and backend(second, []) == "graph_2"
    assert compiled == [first, second]  # torchair's own compiler compiled the graphs it was given
    assert torchair.npu_fx_compiler.get_compiler is original  # swapped only during each call
    files = list((tmp_path / "msprobe_ge_dump").glob("tcmp_fx_stacks_*.json"))
    assert [f.name for f in files] == [f"tcmp_fx_stacks_{os.getpid()}.json"]
    assert json.loads(files[0].read_text()) == {
        "format": "tcmp-fx-stacks",
        "version": 1,
        "pid": os.getpid(),
        "graphs": [
            {"number": 1, "nodes": [["add-aten.add.Tensor", "File m.py, line 3"]]},
            {"number": 2, "nodes": [["add-aten.add.Tensor", "File m.py, line 9"], ["mul-aten.mul.Tensor", "line 10"]]},
        ],
    }


def test_npu_backend_restores_torchair_when_the_compile_fails(tmp_path, monkeypatch):
    torchair, _ = _stand_in_torchair(monkeypatch)
    original = torchair.npu_fx_compiler.get_compiler

    def failing(gm, example_inputs, compiler_config=None):
        torchair.npu_fx_compiler.get_compiler(compiler_config)
        raise RuntimeError("conversion failed")

    torchair.get_npu_backend = lambda compiler_config=None: failing
    backend = npu_backend(enable_ge_dump(tmp_path, config=StandInCompilerConfig()), torchair=torchair)
    with pytest.raises(RuntimeError, match="conversion failed"):
        backend(_Gm(), [])
    assert torchair.npu_fx_compiler.get_compiler is original
    assert not list(tmp_path.rglob("tcmp_fx_stacks_*.json"))


def test_older_torchair_without_a_graph_dump_path_writes_to_the_working_directory(tmp_path, monkeypatch):
    """torchair before 2025-05 has no graph_dump.path option (setting it raises): graph files and stacks go to the
    working directory of the run."""
    torchair, _ = _stand_in_torchair(monkeypatch)
    config = StandInCompilerConfig()
    config.debug.graph_dump = _Options({"type": _one_of(None, "txt")}, type=None)
    config = enable_ge_dump(tmp_path / "run", config=config)
    assert config.debug.graph_dump.type == "txt"
    monkeypatch.chdir(tmp_path)
    assert npu_backend(config, torchair=torchair)(_Gm(_Node("a", "t", "s")), []) == "graph_1"
    assert [p.name for p in tmp_path.glob("tcmp_fx_stacks_*.json")] == [f"tcmp_fx_stacks_{os.getpid()}.json"]


def test_npu_backend_refuses_a_torchair_without_its_compiler_factory(tmp_path, monkeypatch):
    torchair = types.ModuleType("torchair")
    torchair.get_npu_backend = lambda compiler_config=None: None
    monkeypatch.delitem(sys.modules, "torchair.npu_fx_compiler", raising=False)
    with pytest.raises(CaptureUnavailable, match="get_compiler"):
        npu_backend(StandInCompilerConfig(), torchair=torchair)
