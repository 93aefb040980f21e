#!/usr/bin/env python3
"""Write all-MiniLM-L6-v2-int8: the fp32 model.onnx with its weight matrices in int8, by ONNX
Runtime's own dynamic quantization (onnxruntime.quantization.quantize_dynamic).

quarry's local provider serves it as its own model id, `all-MiniLM-L6-v2-int8`.
`scripts/fetch-model` runs this in the throwaway virtualenv of scripts/build-onnx.requirements.txt
(onnxruntime pinned by version and sha256) on the verified model.onnx, and checks the output
against a pinned sha256: the same input and versions give the same bytes.

The options, chosen by measurement (BENCHMARKS.md, "An int8 local model"):
- op types: MatMul only, and of those only the ones with a constant weight (the quantizer's
  default in dynamic mode): the 36 dense layers of the encoder (query, key, value, attention
  output, intermediate, output). The token embeddings (Gather) stay fp32: quantizing them
  shrinks the file but gains no speed. Activations are quantized per call to uint8 (the only
  activation type of dynamic quantization).
- weights: int8 (QInt8), one scale per output channel (per_channel). Per tensor, the vectors
  fell to cosine 0.93-0.95 of fp32's (0.80-0.91 with reduce_range); per channel they stay at
  0.986 or more. QUInt8 weights were as close but slower than fp32 on this CPU (no int8 x uint8
  fast path for them).
- reduce_range: weights in 7 bits. On CPUs without AVX-512 VNNI, ONNX Runtime multiplies
  uint8 activations by int8 weights with an instruction whose 16-bit sums can saturate; with 7
  bits they cannot, so the vectors are the same on every x86-64 CPU. Cost: cosine to fp32
  0.9857 at worst instead of 0.9866 on the measured texts.

Usage: quantize-onnx.py MODEL.onnx OUT.onnx
"""

import logging
import sys
from pathlib import Path

from onnxruntime.quantization import QuantType, quantize_dynamic


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    # The quantizer warns that the model was not "pre-processed" (shape inference and ORT's
    # graph optimisations saved into the file); the graph is kept as written, on purpose:
    # ONNX Runtime optimises it when it loads it, as it does the fp32 one.
    logging.getLogger().setLevel(logging.ERROR)
    tmp = dst.with_suffix(dst.suffix + ".partial")
    quantize_dynamic(
        src,
        tmp,
        op_types_to_quantize=["MatMul"],
        per_channel=True,
        reduce_range=True,
        weight_type=QuantType.QInt8,
    )
    tmp.replace(dst)


if __name__ == "__main__":
    main()
