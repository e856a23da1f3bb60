"""Capture helpers against a STAND-IN for torchair's CompilerConfig (torch_npu cannot be installed here).

The stand-in reproduces the attribute paths of torchair's configs (configs/compiler_config.py, dump_config.py,
debug_config.py, fusion_config.py) and the behaviour that matters: options are fixed attributes (a typo raises, as
NpuBaseConfig.__setattr__ does), option values are checked against the same allowed lists and regexes, dump_path
must be an existing directory, fusion_switch_file an existing file. It is not torchair.
"""

from __future__ import annotations

import json
import os
import re
import sys

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
    write_fusion_off_switch,
)
from tcmp.schemas.layout import FX_ROOT_NAMES, GE_ROOT_NAMES


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
