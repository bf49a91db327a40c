#!/usr/bin/env python3
"""Write all-MiniLM-L6-v2 as an ONNX graph, from the same model.safetensors the
candle backend reads, for the embedding stage's ONNX Runtime backend.

No model hub and no PyTorch: the safetensors file is parsed with numpy, and the
graph is built op by op with the `onnx` package (scripts/fetch-models.sh installs
it, pinned, into its own virtual environment). The graph is the BERT encoder as
Hugging Face's BertModel computes it, followed by the sentence-transformers
pipeline of this model (modules.json: Transformer, Pooling(mean), Normalize):

  inputs   input_ids       int64 [batch, seq]
           attention_mask  int64 [batch, seq]   (1 = token, 0 = padding)
  output   sentence_embedding  float32 [batch, 384], mean-pooled over the mask
                               and L2-normalized

token_type_ids are always 0 for one-segment inputs, so row 0 of the token-type
table is folded into the word embeddings. The output is byte-for-byte
deterministic for a given safetensors file and onnx version, so fetch-models.sh
checks it by SHA-256 like every downloaded file.

  python export-onnx.py MODEL_DIR OUT.onnx
"""
import json
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DTYPES = {"F32": np.float32, "I64": np.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        arr = np.frombuffer(body[start:end], dtype=DTYPES[meta["dtype"]])
        out[name] = arr.reshape(meta["shape"]).copy()
    return out


def main(model_dir, out_path):
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = load_safetensors(f"{model_dir}/model.safetensors")
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(cfg["layer_norm_eps"])
    assert cfg["hidden_act"] == "gelu", cfg["hidden_act"]

    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op, ins, outs=None, **attrs):
        node.count += 1
        outs = outs or [f"{op.lower()}_{node.count}"]
        nodes.append(helper.make_node(op, ins, outs, name=f"{op}_{node.count}", **attrs))
        return outs[0]

    node.count = 0

    def linear(x, prefix):
        # Linear weights are stored [out, in]; MatMul wants [in, out].
        wt = const(f"{prefix}.weight_t", w[f"{prefix}.weight"].T)
        b = const(f"{prefix}.bias", w[f"{prefix}.bias"])
        return node("Add", [node("MatMul", [x, wt]), b])

    def layer_norm(x, prefix):
        g = const(f"{prefix}.weight", w[f"{prefix}.weight"])
        b = const(f"{prefix}.bias", w[f"{prefix}.bias"])
        return node("LayerNormalization", [x, g, b], axis=-1, epsilon=eps)

    i64 = lambda name, v: const(name, np.array(v, dtype=np.int64))
    f32 = lambda name, v: const(name, np.array(v, dtype=np.float32))

    # Embeddings: word + position + token type 0, then LayerNorm.
    word = w["embeddings.word_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    x = node("Gather", [const("word_embeddings", word), "input_ids"], axis=0)
    # Positions 0..seq: the first seq rows of the position table.
    seq_len = node("Shape", ["input_ids"], start=1, end=2)
    pos_table = const("position_embeddings", w["embeddings.position_embeddings.weight"])
    pos = node("Slice", [pos_table, i64("zero_1d", [0]), seq_len, i64("axis0_1d", [0])])
    x = layer_norm(node("Add", [x, pos]), "embeddings.LayerNorm")

    # Additive attention mask [batch, 1, 1, seq]: 0 for tokens, a large negative for padding.
    mask_f = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask4 = node("Unsqueeze", [mask_f, i64("axes_12", [1, 2])])
    neg = node("Mul", [node("Sub", [f32("one_f", 1.0), mask4]), f32("neg_big", -10000.0)])

    split_shape = i64("split_shape", [0, 0, heads, head_dim])
    merge_shape = i64("merge_shape", [0, 0, hidden])
    scale = f32("scale", 1.0 / np.sqrt(head_dim))
    half = f32("half", 0.5)
    inv_sqrt2 = f32("inv_sqrt2", 1.0 / np.sqrt(2.0))

    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        a = f"{p}.attention.self"
        # One MatMul for Q, K and V.
        qkv_w = np.concatenate([w[f"{a}.{n}.weight"].T for n in ("query", "key", "value")], axis=1)
        qkv_b = np.concatenate([w[f"{a}.{n}.bias"] for n in ("query", "key", "value")])
        qkv = node("Add", [node("MatMul", [x, const(f"{a}.qkv_t", qkv_w)]), const(f"{a}.qkv_b", qkv_b)])
        q, k, v = (f"{a}.q", f"{a}.k", f"{a}.v")
        node("Split", [qkv, i64(f"{a}.split", [hidden] * 3)], [q, k, v], axis=2)
        heads_of = lambda t, perm: node("Transpose", [node("Reshape", [t, split_shape])], perm=perm)
        qh = heads_of(q, [0, 2, 1, 3])
        kh = heads_of(k, [0, 2, 3, 1])
        vh = heads_of(v, [0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [qh, kh]), scale]), neg])
        probs = node("Softmax", [scores], axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, vh])], perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge_shape])
        attn = linear(ctx, f"{p}.attention.output.dense")
        x = layer_norm(node("Add", [attn, x]), f"{p}.attention.output.LayerNorm")
        # Feed-forward with exact (erf) GELU, as Hugging Face's "gelu".
        h = linear(x, f"{p}.intermediate.dense")
        gelu = node("Mul", [node("Mul", [h, half]), node("Add", [node("Erf", [node("Mul", [h, inv_sqrt2])]), "one_f"])])
        out = linear(gelu, f"{p}.output.dense")
        x = layer_norm(node("Add", [out, x]), f"{p}.output.LayerNorm")

    # Mean pooling over the mask, then L2 normalization (sentence-transformers' clamps).
    m = node("Unsqueeze", [mask_f, i64("axis_2", [2])])
    summed = node("ReduceSum", [node("Mul", [x, m]), i64("axis_1", [1])], keepdims=0)
    count = node("Max", [node("ReduceSum", [m, "axis_1"], keepdims=0), f32("tiny", 1e-9)])
    mean = node("Div", [summed, count])
    norm = node("Max", [node("ReduceL2", [mean, i64("axis_last", [-1])], keepdims=1), f32("tiny_norm", 1e-12)])
    node("Div", [mean, norm], ["sentence_embedding"])

    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18)],
        producer_name="portcullis scripts/export-onnx.py",
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    with open(out_path, "wb") as f:
        f.write(model.SerializeToString(deterministic=True))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
