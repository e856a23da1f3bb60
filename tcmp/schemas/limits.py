"""How much work one input file may cost: the caps the readers check before they inflate, parse or allocate.

A dump tree is written by other users' jobs, so a file's own claims (a zip member's size, an .npy header's
length and shape, a graph text's length) are untrusted: a 4 KB archive can inflate to gigabytes, a header can
list millions of dims. Each cap is far above what torchair and the msprobe scripts write, and low enough that
refusing a file costs milliseconds and a few MB. A refused file is an error record that says what was larger than
what (`refused: … larger than …`), never a partial summary. The README's Security section lists them.
"""

from __future__ import annotations

# `.npz` min/max archives (msprobe's appendix script: two members, `inputs` and `outputs`, of shape (n, 2))
MAX_NPZ_MEMBERS = 16
MAX_NPZ_MEMBER_BYTES = 16 << 20  # one member, inflated (its declared size is checked before inflating)
MAX_NPZ_TOTAL_BYTES = 32 << 20  # every member together, inflated

# tensors described by one summary file (an npz's rows; a GE op has a few dozen inputs and outputs)
MAX_TENSORS_PER_FILE = 16_384

# `.npy` headers (numpy itself writes headers of < 4 KB; its loader refuses more than 10,000 bytes by default)
MAX_NPY_HEADER_BYTES = 64 << 10
MAX_NPY_NDIM = 64  # numpy 2's own limit on an array's dims (NPY_MAXDIMS)

# torch.save archives (`.pt`, aclgraph dumps): torch writes ~7 entries and a data.pkl of ~200 bytes per tensor
MAX_TORCH_ZIP_ENTRIES = 65_536
MAX_TORCH_ZIP_DIRECTORY_BYTES = 16 << 20  # the central directory, parsed in memory
MAX_TORCH_PICKLE_BYTES = 4 << 20  # data.pkl, read whole and walked opcode by opcode
MAX_TORCH_PICKLE_OPCODES = 1 << 20  # each may make a Python object (~20 per tensor): ~100 MB at most

# graph text files (`dynamo_original_graph_*.txt`): held in memory and read window by window (peak RSS < 3x their
# size); one off the printers' layout, or refused, is read again whole, at ~30x its size, only under the second cap
MAX_GRAPH_TEXT_BYTES = 1 << 30
MAX_WHOLE_GRAPH_TEXT_BYTES = 48 << 20


def refusal(what: str, amount: int, limit: int, unit: str = "bytes") -> str:
    """What a file refused by a cap is recorded with: `refused: <what> of N <unit> larger than the limit of M`."""
    return f"refused: {what} of {amount:,} {unit} larger than the limit of {limit:,} {unit}"
