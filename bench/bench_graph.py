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

    python bench/bench_graph.py [--layers 130] [--repeat 7]
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
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
            return 1
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
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
