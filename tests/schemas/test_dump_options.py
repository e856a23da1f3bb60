"""GE's dump options JSON: GE's selection (hicann/ge base/common/dump/dump_manager.cc SetDumpList,
dump_properties.cc IsNeedDump, davinci_model.cc OpNeedDump), the file's forms, hostile files, finding the file."""

from __future__ import annotations

import json
import os
import time

import pytest

from tcmp.schemas.dump_options import (
    MAX_DEPTH,
    MAX_OPTIONS_BYTES,
    DumpOptionsError,
    find_dump_options,
    for_rank,
    read_dump_options,
    selects,
)


def _write(path, dump_list=None, **dump):
    body = dict(dump)
    if dump_list is not None:
        body["dump_list"] = dump_list
    path.write_text(json.dumps({"dump": body}, indent=4))
    return path


def test_torchair_form_selects_layers_of_its_model_by_op_name(tmp_path):
    # as torchair's _set_dump_options_json writes it for dump_layer="Add_1 Mul" and graph "graph_1"
    path = _write(tmp_path / "o.json", [{"model_name": "graph_1", "layer": ["Add_1", "Mul"]}], dump_path="/d",
                  dump_mode="all", dump_data="tensor")  # fmt: skip
    selection = read_dump_options(path)
    layers = selection.layers_for(("graph_1", "graph_1_0"))
    assert layers == {"Add_1", "Mul"}
    assert selection.layers_for(("graph_1_0",)) == frozenset()  # a model no entry names: GE dumps none of it
    # layers are names: an op named like a layer is dumped whatever its type, an op of type Mul named Mul_1 is not
    assert selects(layers, "Mul") and not selects(layers, "Mul_1") and not selects(layers, "Add")
    # a fused op is dumped when one of its _datadump_original_op_names is a layer
    assert selects(layers, "Add_1Mul_2", original_names=("Add_1", "Mul_2"))


def test_acl_json_forms(tmp_path):
    every = read_dump_options(_write(tmp_path / "a.json", [{"model_name": "", "layer": ["Conv"]},
                                                           {"model_name": "graph_1"}]))  # fmt: skip
    assert every.layers_for(("graph_2",)) == {"Conv"}  # an entry without a model name decides for every model
    whole = read_dump_options(_write(tmp_path / "b.json", [{"model_name": "graph_1"}]))
    assert whole.layers_for(("graph_1",)) is None  # no layers: the whole model
    assert read_dump_options(_write(tmp_path / "c.json", [])).layers_for(("x",)) is None  # no list: everything
    assert read_dump_options(_write(tmp_path / "d.json")).layers_for(("x",)) is None
    assert selects(None, "anything")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", '"dump" object'),
        ('{"dump": {"dump_list": {"model_name": "g"}}}', "not a list"),
        ('{"dump": {"dump_list": [3]}}', "not an object"),
        ('{"dump": {"dump_list": [{"model_name": 3}]}}', "model_name"),
        ('{"dump": {"dump_list": [{"layer": "Add"}]}}', "list of op names"),
        ('{"dump": {"dump_list": [{"layer": [1]}]}}', "list of op names"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested deeper"),
        ('{"dump": {"x": "' + "[" * 100 + '"}}', None),  # brackets inside a string are not nesting
    ],
)
def test_malformed_files_fail_clearly(tmp_path, text, words):
    path = tmp_path / "o.json"
    path.write_text(text)
    if words is None:
        assert read_dump_options(path).entries == ()
        return
    with pytest.raises(DumpOptionsError, match=words) as info:
        read_dump_options(path)
    assert info.value.path == path


def test_oversized_and_unreadable(tmp_path):
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(MAX_OPTIONS_BYTES + 1)  # sparse: the size is refused before anything is read
    with pytest.raises(DumpOptionsError, match="larger"):
        read_dump_options(big)
    with pytest.raises(DumpOptionsError, match="cannot be read"):
        read_dump_options(tmp_path / "absent.json")


def test_found_above_the_dump_or_in_the_working_directory_and_per_rank(tmp_path):
    run = tmp_path / "run"
    dump = run / "dump" / "msprobe_ge_dump"
    dump.mkdir(parents=True)
    cwd = tmp_path / "elsewhere"
    (cwd / "ge_dump_data_json").mkdir(parents=True)
    _write(cwd / "ge_dump_data_json" / "dump_options_worldsize1_rank0_pid7.json", [])
    assert [f.pid for f in find_dump_options(dump, cwd)] == [7]  # nothing beside the dump: the working directory
    (run / "ge_dump_data_json").mkdir()
    old = _write(run / "ge_dump_data_json" / "dump_options_worldsize2_rank0_pid10.json", [])
    new = _write(run / "ge_dump_data_json" / "dump_options_worldsize2_rank0_pid9.json", [])
    rank1 = _write(run / "ge_dump_data_json" / "dump_options_worldsize2_rank1_pid11.json", [])
    (run / "ge_dump_data_json" / "dump_options_notes.json").write_text("{}")  # not torchair's name: ignored
    now = time.time()
    os.utime(old, (now - 100, now - 100))
    os.utime(new, (now, now))
    found = find_dump_options(dump, cwd)
    assert sorted(f.pid for f in found) == [9, 10, 11]
    assert for_rank(found, 0).path == new  # the newest of the rank's own files
    assert for_rank(found, 1).path == rank1 and for_rank(found, None).path == new and for_rank(found, 2) is None
