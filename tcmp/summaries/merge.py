"""The summary of a tensor made of pieces, from the pieces' summaries: what statistics mode needs of an FFTS+ op
whose slice files only the index holds.

min and max are the pieces' extremes, the mean their count-weighted mean, the L2 norm the root of the sum of
their squares, NaN and inf counts their sums. The CRC-32 of the canonical bytes follows from the pieces' CRCs only
when the pieces lie one after the other in C order (concatenated along an axis with nothing but 1s before it):
then zlib's crc32_combine arithmetic gives it. Otherwise it is unknown, and the reason is returned with the
summary.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Optional

import numpy as np

from tcmp.schemas.dtypes import DataType, decode_payload, payload_nbytes
from tcmp.schemas.dump_records import Summary
from tcmp.summaries.summarize import canonical

_CRC_POLY = 0xEDB88320  # zlib's reflected CRC-32 polynomial
CRC_UNKNOWN = "CRC-32 unknown"  # how a merged summary says why it has no CRC (md5 mode gives the reason)


def _gf2_times(matrix: Sequence[int], vector: int) -> int:
    total, row = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[row]
        vector >>= 1
        row += 1
    return total


def _gf2_square(matrix: Sequence[int]) -> list[int]:
    return [_gf2_times(matrix, matrix[n]) for n in range(32)]


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of A + B from crc1 = CRC-32(A), crc2 = CRC-32(B) and len(B) (zlib's crc32_combine)."""
    if len2 <= 0:
        return crc1
    odd = [_CRC_POLY] + [1 << n for n in range(31)]  # the operator of one zero bit
    even = _gf2_square(odd)  # two zero bits
    odd = _gf2_square(even)  # four
    while True:  # apply len2 zero bytes to crc1, squaring the operator per bit of len2
        even = _gf2_square(odd)
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = _gf2_square(even)
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return (crc1 ^ crc2) & 0xFFFFFFFF


@functools.lru_cache(maxsize=64)
def canonical_itemsize(dtype: Optional[str]) -> Optional[int]:
    """Bytes per element of a tensor's canonical bytes (tcmp.summaries.summarize), by its dump dtype name (GE's
    `DT_…` or numpy's); None when not known (a dtype kept as raw bytes)."""
    if dtype is None:
        return None
    code = DataType.__members__.get(dtype) if dtype.startswith("DT_") else None
    try:
        if code is None:
            return canonical(np.zeros(1, dtype=np.dtype(dtype))).itemsize
        nbytes = payload_nbytes(code, 1)
        decoded = decode_payload(bytes(nbytes), code, 1) if nbytes is not None else None
    except (TypeError, ValueError):
        return None
    if decoded is None or decoded.raw:
        return None
    return canonical(decoded.array).itemsize


def _total(values: Sequence[Optional[int]]) -> Optional[int]:
    return None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]


def merge_summaries(
    pieces: Sequence[Summary], dtype: Optional[str], contiguous: bool
) -> tuple[Optional[Summary], tuple[str, ...]]:
    """The summary of the concatenation of `pieces` (in order); `contiguous`: the pieces follow each other in the
    whole tensor's C order. Returns it with notes on what could not be derived."""
    if len(pieces) == 1:
        return pieces[0], ()
    numel = _total([p.numel for p in pieces])
    nan = _total([p.nan_count for p in pieces])
    inf = _total([p.inf_count for p in pieces])
    if numel is None or nan is None:
        return None, ("FFTS+ slices: a slice has no element count: no statistics for the whole tensor",)
    valid = [(p, p.numel - p.nan_count) for p in pieces if p.numel - p.nan_count > 0]  # type: ignore[operator]
    low = high = mean = l2 = None
    if valid and all(p.min is not None and p.max is not None for p, _ in valid):
        low, high = min(p.min for p, _ in valid), max(p.max for p, _ in valid)  # type: ignore[type-var]
    if valid and all(p.mean is not None for p, _ in valid):
        pos_inf, neg_inf = high == math.inf, low == -math.inf
        if any(math.isnan(p.mean) for p, _ in valid) or (pos_inf and neg_inf):  # type: ignore[arg-type]
            mean = math.nan
        elif pos_inf or neg_inf:
            mean = math.inf if pos_inf else -math.inf
        else:
            mean = sum(p.mean * n for p, n in valid) / sum(n for _, n in valid)  # type: ignore[operator,misc]
    if valid and all(p.l2norm is not None for p, _ in valid):
        l2 = math.sqrt(sum(p.l2norm**2 for p, _ in valid))  # type: ignore[operator,misc]
    crc, notes = _merged_crc(pieces, dtype, contiguous)
    return Summary(numel, low, high, mean, l2, nan, inf, crc), notes


def _merged_crc(pieces: Sequence[Summary], dtype: Optional[str], contiguous: bool) -> tuple[Optional[int], tuple]:
    if any(p.crc32 is None for p in pieces):
        return None, ()
    if not contiguous:
        return None, (f"{CRC_UNKNOWN}: the FFTS+ slices are not contiguous in the whole tensor's C order, so their "
                      "CRCs do not combine",)  # fmt: skip
    itemsize = canonical_itemsize(dtype)
    if itemsize is None:
        return None, (f"{CRC_UNKNOWN}: the canonical bytes of {dtype} have no known size per element",)
    crc = pieces[0].crc32
    for piece in pieces[1:]:
        crc = crc32_combine(crc, piece.crc32, piece.numel * itemsize)  # type: ignore[arg-type,operator]
    return crc, ()
