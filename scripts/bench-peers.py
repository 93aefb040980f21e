#!/usr/bin/env python3
"""The peer of `examples/bench_local`: ONNX Runtime's Python API on the same graph, with the same
tokenizer.json (the way fastembed runs this model), 2 intra-op threads.

Usage: bench-peers.py MODEL_DIR [GRAPH]. GRAPH is model.onnx (the default) or model-int8.onnx;
the int8 graph gets the session option quarry gives it (SkipLayerNormFusion off, see
src/providers/local/model.rs), so both run the same optimised graph. Loads the model once, then answers one JSON line on stdin
with one JSON line on stdout, until stdin closes:
  {"texts": [...], "requests": n}  ->  {"seconds": s, "vectors": [[...], ...]}
embedding the texts as one batch per request, n requests one after another, and timing them
(tokenizing included); `vectors` are the last request's. bench_local alternates such turns with
its own, so both are measured in the same moments of a machine whose speed drifts.
Made by scripts/bench-peers-setup (onnxruntime, tokenizers, numpy from the Python package index).
"""

import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def main():
    model_dir = sys.argv[1]
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    graph = sys.argv[2] if len(sys.argv) > 2 else "model.onnx"
    if graph == "model-int8.onnx":
        options.add_session_config_entry("optimization.disable_specified_optimizers", "SkipLayerNormFusion")
    session = ort.InferenceSession(os.path.join(model_dir, graph), options, providers=["CPUExecutionProvider"])

    def embed(texts):
        encodings = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return session.run(["sentence_embedding"], feeds)[0]

    for line in sys.stdin:
        job = json.loads(line)
        started = time.perf_counter()
        for _ in range(job["requests"]):
            vectors = embed(job["texts"])
        seconds = time.perf_counter() - started
        print(json.dumps({"seconds": seconds, "vectors": vectors.tolist()}), flush=True)


if __name__ == "__main__":
    main()
