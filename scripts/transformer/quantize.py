#!/usr/bin/env python3
"""Quantize a fine-tuned model's ONNX graph to int8 (dynamic quantization of the
MatMul weights, ONNX Runtime's own tool), into a copy of the models directory, so
`[embedding] models_dir` can point at either and the two are evaluated alike.

  python quantize.py SRC DST [OP ...]     (default op: MatMul; add Gather for the
                                         word-embedding table too)

Needs onnxruntime (the same 1.22.1 the stage loads) in the environment.
"""
import os
import shutil
import sys

from onnxruntime.quantization import QuantType, quantize_dynamic

from common import sha256


def main(src, dst, ops):
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        p = os.path.join(src, f)
        if os.path.isfile(p) and f != "model.onnx":
            shutil.copy(p, os.path.join(dst, f))
    quantize_dynamic(
        os.path.join(src, "model.onnx"),
        os.path.join(dst, "model.onnx"),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=ops,
    )
    for f in ("model.onnx",):
        a, b = os.path.join(src, f), os.path.join(dst, f)
        print(f"{f}: {os.path.getsize(a) / 1e6:.1f} MB -> {os.path.getsize(b) / 1e6:.1f} MB (sha256 {sha256(b)})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:] or ["MatMul"])
