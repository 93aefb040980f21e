#!/usr/bin/env python3
"""The peers of `examples/bench_local`: ONNX Runtime's Python API on the same model.onnx, with
the same tokenizer.json (the way fastembed runs this model), 2 intra-op threads.

Reads a JSON object on stdin: {"model_dir", "texts", "min_seconds", "min_requests"}; embeds the
texts as one batch per request, one request after another, for at least min_seconds and
min_requests requests after one warm-up; writes {"chunks_per_s", "vectors"} on stdout.
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
    job = json.load(sys.stdin)
    model_dir = job["model_dir"]
    texts = job["texts"]
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), options, providers=["CPUExecutionProvider"])

    def embed():
        encodings = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return session.run(["sentence_embedding"], feeds)[0]

    vectors = embed()  # warm-up
    started = time.perf_counter()
    requests = 0
    while requests < job["min_requests"] or time.perf_counter() - started < job["min_seconds"]:
        embed()
        requests += 1
    elapsed = time.perf_counter() - started
    json.dump({"chunks_per_s": requests * len(texts) / elapsed, "vectors": vectors.tolist()}, sys.stdout)


if __name__ == "__main__":
    main()
