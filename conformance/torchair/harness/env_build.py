"""The harness's own environment, built from package registries and local wheels each time it is missing.

- One venv with CPU-runnable torch and what torchair imports (numpy, protobuf, packaging) plus ml_dtypes for the
  executor. torch 2.14.1: the torch-npu 2.14.0 wheel pins torch 2.14.0.*, and 2.14.1 is the patch release of the
  same minor that this machine installs from local disk (its CUDA build runs on CPU; ~50 s). The older torchair
  runs on the same torch with the shims in torch_compat.py: its own torch (2.5.1) is not installable here in time.
- Per torchair version: the torch-npu wheel from PyPI (`pip download --no-deps`), and its
  `torch_npu/dynamo/torchair/` extracted as a top-level `torchair` package, with every compiled module in
  `torchair/core/` replaced by the stub of the same name from stubs/ (the harness refuses a wheel that has a
  compiled module without a stub). Nothing else of the wheel is installed: torch_npu itself is the stand-in.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .versions import TorchairVersion

HERE = Path(__file__).resolve().parent.parent  # conformance/torchair
STUBS = HERE / "stubs"
STANDIN = HERE / "torch_npu_standin"
TORCH = "torch==2.14.1"
REQUIREMENTS = (TORCH, "numpy", "protobuf", "packaging", "ml_dtypes")
_TORCHAIR_IN_WHEEL = "torch_npu/dynamo/torchair/"
# torch_npu's NPU graph module: the stand-in's save_npugraph_tensor runs its path builder and host function
# (torch_npu_standin/torch_npu/_save_op.py); kept as a file, never imported as torch_npu
_GRAPHS_IN_WHEEL = "torch_npu/npu/graphs.py"
WHEEL_GRAPHS = Path("torch_npu_wheel") / "npu" / "graphs.py"
# torch_npu 2.14's npugraph_ex backend (`torch.compile(backend="npugraph_ex")`): pure Python, a package of its own
# beside torchair (it imports itself as `npugraph_ex`), extracted as torchair is
_NPUGRAPH_EX_IN_WHEEL = "torch_npu/dynamo/npugraph_ex/"


@dataclass(frozen=True)
class HarnessEnv:
    python: Path
    torchair_roots: dict  # version key -> directory holding the extracted `torchair` package

    def pythonpath(self, version_key: str) -> str:
        return ":".join(str(p) for p in (self.torchair_roots[version_key], STANDIN, HERE))


def _run(command: list, log) -> None:
    log(" ".join(str(c) for c in command))
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def _venv(root: Path, versions, log) -> Path:
    venv = root / "venv"
    python = venv / "bin" / "python"
    requirements = list(REQUIREMENTS) + sorted({r for v in versions for r in v.pip_extra})
    marker = venv / ".harness-requirements"
    if python.exists() and marker.exists() and marker.read_text() == "\n".join(requirements):
        return python
    shutil.rmtree(venv, ignore_errors=True)
    _run([sys.executable, "-m", "venv", venv], log)
    _run([python, "-m", "pip", "install", "--quiet", *requirements], log)
    marker.write_text("\n".join(requirements))
    return python


def _wheel(root: Path, version: TorchairVersion, log) -> Path:
    wheels = root / "wheels"
    found = sorted(wheels.glob(f"torch_npu-{version.torch_npu}-*.whl"))
    if not found:
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"torch-npu=={version.torch_npu}",
              "-d", wheels], log)  # fmt: skip
        found = sorted(wheels.glob(f"torch_npu-{version.torch_npu}-*.whl"))
    if len(found) != 1:
        raise RuntimeError(f"expected one torch-npu {version.torch_npu} wheel in {wheels}, found {len(found)}")
    return found[0]


def extract_torchair(wheel: Path, dest: Path) -> list[str]:
    """torchair's Python code from the wheel into dest/torchair, its compiled core modules replaced by the stubs.
    Returns the names of the stubbed modules."""
    shutil.rmtree(dest, ignore_errors=True)
    stubbed = []
    with zipfile.ZipFile(wheel) as archive:
        if _GRAPHS_IN_WHEEL in archive.namelist():  # torch-npu 2.5.1 has no save_npugraph_tensor (nor dumps)
            (dest / WHEEL_GRAPHS).parent.mkdir(parents=True, exist_ok=True)
            (dest / WHEEL_GRAPHS).write_bytes(archive.read(_GRAPHS_IN_WHEEL))
        for member in archive.namelist():
            if member.startswith(_NPUGRAPH_EX_IN_WHEEL) and not member.endswith("/"):
                if member.endswith(".so") or ".so." in member:
                    raise RuntimeError(f"{wheel.name} has a compiled npugraph_ex module: {member}")
                target = dest / member[len("torch_npu/dynamo/") :]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
                continue
            if not member.startswith(_TORCHAIR_IN_WHEEL) or member.endswith("/"):
                continue
            relative = member[len("torch_npu/dynamo/") :]
            if relative.endswith(".so") or ".so." in relative:
                module = Path(relative).name.split(".")[0]
                if Path(relative).parent != Path("torchair/core") or not (STUBS / f"{module}.py").exists():
                    raise RuntimeError(f"{wheel.name} has a compiled module the harness has no stub for: {relative}")
                stubbed.append(module)
                continue
            target = dest / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(member))
    for module in stubbed:
        shutil.copy(STUBS / f"{module}.py", dest / "torchair" / "core" / f"{module}.py")
    return sorted(stubbed)


def build(work: Path, versions, log=print) -> HarnessEnv:
    root = Path(work) / "env"
    root.mkdir(parents=True, exist_ok=True)
    python = _venv(root, versions, log)
    roots = {}
    for version in versions:
        dest = root / f"torchair-{version.key}"
        stubbed = extract_torchair(_wheel(root, version, log), dest)
        log(f"torchair {version.key}: extracted, stubbed {', '.join(stubbed)}")
        roots[version.key] = dest
    return HarnessEnv(python, roots)
