#!/usr/bin/env python3
"""The arithmetic ceiling of this machine for the transformer stage: how many
128-token chunks per second MiniLM-L6 (6 layers, hidden 384, FFN 1536) could
reach if every FLOP ran at the rate ONNX Runtime's own MatMul kernels reach
here on the model's matrix shapes (fp32, and int8 by dynamic quantization, the
kernels the shipped graph runs), beside what given graphs reach in the same run.

  python ceiling.py [GRAPH.onnx ...]     (a markdown table on stdout)

Needs onnxruntime==1.22.1 (the version the stage loads), onnx and numpy. Not a
CI step: the issue's throughput goal (200 chunks/s of 128 tokens on 2 threads)
is judged against it (reports/transformer/ceiling.md).
"""
import os
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

THREADS = 2
TOKENS = 128
BATCH = 32
ROWS = BATCH * TOKENS
LAYERS, HIDDEN, FFN = 6, 384, 1536
SECONDS = 4.0


def session(path):
    o = ort.SessionOptions()
    o.intra_op_num_threads = THREADS
    o.inter_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


def per_second(run):
    run()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < SECONDS:
        run()
        n += 1
    return n / (time.perf_counter() - t0)


def matmul_gflops(k, m, int8, tmp):
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((k, m)) * 0.05).astype(np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"])], "matmul",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, m])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what ONNX Runtime 1.22 reads
    path = os.path.join(tmp, f"matmul_{k}_{m}.onnx")
    onnx.save(model, path)
    if int8:
        q = path.replace(".onnx", "_int8.onnx")
        quantize_dynamic(path, q, weight_type=QuantType.QInt8)
        path = q
    s = session(path)
    x = rng.standard_normal((ROWS, k)).astype(np.float32)
    return per_second(lambda: s.run(None, {"X": x})) * 2 * ROWS * k * m / 1e9


def cpu():
    name, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and name == "?":
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    wanted = ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8"]
    return name, [f for f in wanted if f in flags]


def main(graphs):
    weight_macs = TOKENS * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN)
    attention_macs = 2 * TOKENS * TOKENS * HIDDEN
    chunk_gflop = LAYERS * 2 * (weight_macs + attention_macs) / 1e9
    name, flags = cpu()
    print(f"CPU: {name} ({os.cpu_count()} cores; {', '.join(flags)}); ONNX Runtime {ort.__version__}, "
          f"{THREADS} threads. MiniLM-L6 at {TOKENS} tokens: {chunk_gflop:.2f} GFLOP per chunk.\n")
    print("| kernels | MatMul GFLOP/s: 384×384 / 384×1536 / 1536×384 (4,096 rows) | ceiling, chunks/s |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for int8 in (False, True):
            rates = [matmul_gflops(k, m, int8, tmp) for k, m in ((HIDDEN, HIDDEN), (HIDDEN, FFN), (FFN, HIDDEN))]
            kind = "int8 (dynamic quantization)" if int8 else "fp32"
            print(f"| {kind} | {' / '.join(f'{r:.0f}' for r in rates)} | {max(rates) / chunk_gflop:.0f} |")
    if graphs:
        print("\n| graph | chunks/s (batches of 1 / 4 / 32 × 128 tokens) | GFLOP/s at the best |")
        print("|---|---|---|")
    for g in graphs:
        s = session(g)
        rates = []
        for b in (1, 4, BATCH):
            ids = np.full((b, TOKENS), 1000, dtype=np.int64)
            ids[:, 0], ids[:, -1] = 101, 102
            mask = np.ones((b, TOKENS), dtype=np.int64)
            rates.append(b * per_second(lambda: s.run(None, {"input_ids": ids, "attention_mask": mask})))
        print(f"| `{g}` | {' / '.join(f'{r:.1f}' for r in rates)} | {max(rates) * chunk_gflop:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
