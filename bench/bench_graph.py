"""Benchmark of the graph text reader (issue 14; not a test).

A graph shaped like the one torchair converts from a decoder-only LLM (tcmp/schemas/synth/decoder_graph.py: ~72 GE ops
per layer — a decomposed rms_norm, projections with unfed optional inputs, reshapes and transposes fed by `Const`
ops with raw bytes, attention, a gated MLP; list attributes with `val_type`, input and output descs with shapes
and `_meta` strings, `_fx_tensor_name` where torchair's converter sets it) is printed with protobuf's own
printer, then read, in the same run, by:

- tcmp's reader (`tcmp.schemas.graph_reader.read_graph`: the one-field-per-line path every printer's output takes);
- protobuf's `text_format.Parse` against the same schema (the reference, pure Python), and the records taken
  from its message;
- tcmp's tokenizer path alone (what a file off the printers' layout costs), for reference.

Speeds are MB of text per second of one core (process time, the best of the repetitions; the machine is shared),
and as ratios to protobuf. Target: tcmp's reader >= 30 MB/s.

Memory (issue 26): for graphs of `--memory-layers` (default 315 and 2450 layers: ~26 MB and ~200 MB of text),
each read once in a fresh process: the peak RSS growth over the process's own after its imports (VmHWM; the
text read into memory counts, as read_graph holds it), and tracemalloc's peak, as ratios to the file's size, for
tcmp's reader and, as the baseline, for the whole-file views it falls back to on refused files (what every read
cost before). Target: the reader's peak RSS <= 3x the file's size (judged on RSS: what users see). protobuf's
speed is measured up to 50 MB (above that it takes minutes); the whole-file baseline up to 50 MB as well.

    python bench/bench_graph.py [--layers 130] [--repeat 7] [--memory-layers 315 2450] [--memory-only]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from google.protobuf import text_format

from tcmp.schemas.graph_reader import GraphTextReader, read_graph
from tcmp.schemas.graph_tokens import token_view
from tcmp.schemas.proto import GraphDef
from tcmp.schemas.synth.decoder_graph import decoder_graph_specs
from tcmp.schemas.synth.graph_writer import build_graph_def, graph_text

TARGET_MB_S = 30.0
TARGET_PEAK_RATIO = 3.0
_SLOW_ABOVE = 50e6  # bytes: protobuf and the whole-file baseline are skipped above this

# One read in a fresh process: peak RSS growth over the process after imports, or tracemalloc's peak.
_CHILD = """
import json, sys, time, tracemalloc
from pathlib import Path
from tcmp.schemas.graph_reader import parse_graph_bytes, parse_whole_graph_bytes
def high_water():  # VmHWM, not ru_maxrss: that one keeps the high-water mark of the parent before exec
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
path, how, traced = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
parse = parse_graph_bytes if how == "tcmp" else parse_whole_graph_bytes
base = high_water()
if traced:
    tracemalloc.start()
start = time.process_time()
graph = parse(path.read_bytes(), path)
seconds = time.process_time() - start
grown = high_water() - base
peak = tracemalloc.get_traced_memory()[1] if traced else grown
print(json.dumps({"ops": len(graph.ops), "peak": peak, "seconds": seconds}))
"""


def best_time(function, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=130)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--memory-layers", type=int, nargs="*", default=[315, 2450])
    parser.add_argument("--memory-only", action="store_true", help="skip the speed table")
    args = parser.parse_args()
    speed_met = args.memory_only or speed(args)
    memory_met = all([memory(layers) for layers in args.memory_layers])
    return 0 if speed_met and memory_met else 1


def _child(path: Path, how: str, traced: bool) -> dict:
    result = subprocess.run([sys.executable, "-c", _CHILD, str(path), how, "1" if traced else "0"],
                            capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(result.stdout)


def memory(layers: int) -> bool:
    """The reader's peak against the file's size, on one graph of `layers` decoder layers."""
    with tempfile.TemporaryDirectory(prefix="tcmp-bench-graph-") as work:
        path = Path(work) / "dynamo_original_graph_1_rank_0_pid_1_ts_20261201000000000000.txt"
        graph_def = build_graph_def("graph_1", decoder_graph_specs(layers))
        text = graph_text(graph_def)
        del graph_def
        path.write_text(text, encoding="utf-8")
        size = path.stat().st_size
        rows = [("tcmp", "tcmp's reader (window by window)")]
        if size <= _SLOW_ABOVE:
            rows.append(("whole", "whole-file views (before; refused files)"))
        print(f"\nmemory: {layers} decoder layers, {size / 1e6:.1f} MB of text")
        print(f"{'reader':<44}{'ops':>8}{'MB/s':>8}{'RSS MB':>8}{'x file':>8}{'traced MB':>11}{'x file':>8}")
        met = True
        for how, label in rows:
            rss, traced = _child(path, how, False), _child(path, how, True)
            mb_s, ratio, traced_ratio = size / 1e6 / rss["seconds"], rss["peak"] / size, traced["peak"] / size
            print(f"{label:<44}{rss['ops']:>8}{mb_s:>8.1f}{rss['peak'] / 1e6:>8.0f}{ratio:>7.2f}x"
                  f"{traced['peak'] / 1e6:>11.0f}{traced_ratio:>7.2f}x")  # fmt: skip
            if how == "tcmp":
                met = rss["peak"] / size <= TARGET_PEAK_RATIO
        if size <= _SLOW_ABOVE:
            protobuf = best_time(lambda: text_format.Parse(text, GraphDef()), 1)
            print(f"{'protobuf text_format.Parse (reference)':<44}{'':>8}{size / 1e6 / protobuf:>8.1f}")
        else:
            print(f"(protobuf and the whole-file views skipped above {_SLOW_ABOVE / 1e6:.0f} MB: minutes, and "
                  "~23x the file)")  # fmt: skip
    verdict = "met" if met else "MISSED"
    print(f"target: the reader's peak RSS <= {TARGET_PEAK_RATIO:.0f}x the file's size: {verdict}")
    return met


def speed(args) -> bool:
    specs = decoder_graph_specs(args.layers)
    text = graph_text(build_graph_def("graph_1", specs))
    with tempfile.TemporaryDirectory(prefix="tcmp-bench-graph-") as work:
        path = Path(work) / "dynamo_original_graph_1_rank_0_pid_1_ts_20261201000000000000.txt"
        path.write_text(text, encoding="utf-8")
        size = path.stat().st_size
        graph = read_graph(path)
        reference = GraphDef()
        text_format.Parse(text, reference)
        if len(graph.ops) != len(reference.op) or len(graph.ops) < 5000:
            print(f"the graph has {len(graph.ops)} ops (protobuf: {len(reference.op)}); need >= 5,000")
            return False
        raw = path.read_bytes()
        ours = best_time(lambda: read_graph(path), args.repeat)
        protobuf = best_time(lambda: text_format.Parse(text, GraphDef()), max(2, args.repeat // 3))
        tokens = best_time(lambda: GraphTextReader(token_view(raw)).read(), max(2, args.repeat // 3))

    mb = size / 1e6
    print(f"graph: {len(graph.ops)} ops, {mb:.1f} MB of text ({args.layers} decoder layers)")
    print(f"{'reader':<44}{'s':>8}{'MB/s':>9}{'x protobuf':>12}")
    rows = (
        ("tcmp (line view: the printers' layout)", ours),
        ("tcmp (tokenizer: any text format)", tokens),
        ("protobuf text_format.Parse (reference)", protobuf),
    )
    for label, seconds in rows:
        print(f"{label:<44}{seconds:>8.3f}{mb / seconds:>9.1f}{protobuf / seconds:>11.1f}x")
    met = mb / ours >= TARGET_MB_S
    print(f"target: tcmp's reader >= {TARGET_MB_S:.0f} MB/s per core: {'met' if met else 'MISSED'} ({mb / ours:.1f})")
    return met


if __name__ == "__main__":
    sys.exit(main())
