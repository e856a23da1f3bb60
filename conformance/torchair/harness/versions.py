"""The torchair versions the harness runs, and what each needs besides the torch it is given.

torchair ships inside the torch-npu wheel (`torch_npu/dynamo/torchair/`); each entry names the wheel on PyPI and
the facts of that era that the GE side must reproduce (where GE would have put its dump tree).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TorchairVersion:
    key: str  # used in directory names and the report
    torch_npu: str  # the PyPI release whose wheel carries this torchair
    wheel_built: str  # the date of the wheel's files: which torchair era it is
    torch_wanted: str  # the torch the wheel was built against
    ge_rank_dirs: bool  # GE dumps under worldsize{W}_global_rank{R}/ (torchair >= 2025-08)
    torch_shims: tuple[str, ...] = ()  # harness/torch_compat.py: what an older torchair needs of a newer torch
    pip_extra: tuple[str, ...] = ()  # extra requirements of this torchair, installed into the shared venv
    # the aclgraph dump runs (harness/capture.py ACL_RUNS) this wheel has: torchair's reduce-overhead with
    # dump_config.enable_dump and data_dump_stage, and the npugraph_ex backend with dump_tensor_data (torch-npu
    # 2.14; 2.5.1's torchair has neither the stage nor the save op, and the wheel no npugraph_ex)
    aclgraph_runs: tuple[str, ...] = ()


VERSIONS = (
    TorchairVersion(
        key="2.14.0",
        torch_npu="2.14.0",
        wheel_built="2025-10",
        torch_wanted="2.14.0",
        ge_rank_dirs=True,
        aclgraph_runs=("ro_original", "ro_optimized", "ngx_original", "ngx_optimized"),
    ),
    TorchairVersion(
        key="2.5.1",
        torch_npu="2.5.1",
        wheel_built="2025-04-24",
        torch_wanted="2.5.1",
        ge_rank_dirs=False,
        torch_shims=("hint_int",),
        # torchair 2.5.1 reads versions through pkg_resources, which setuptools dropped in 81
        pip_extra=("setuptools>=77,<81",),
    ),
)


def version(key: str) -> TorchairVersion:
    for v in VERSIONS:
        if v.key == key:
            return v
    raise KeyError(f"unknown torchair version {key!r}; known: {', '.join(v.key for v in VERSIONS)}")
