#!/usr/bin/env python3
"""Runs an exported ONNX model in onnxruntime, as a phone app would, for the tests that compare it with the service.

usage: run_onnx.py MODEL.onnx INPUTS.f32 COUNT
INPUTS.f32 holds COUNT inputs, each [3, H, W] float32 little-endian, preprocessed as the model's metadata_props say.
Prints one JSON object: {"probabilities": [[...], ...], "metadata": {...}, "input": [...], "output": [...]}.
"""
import json
import sys

import numpy as np
import onnxruntime


def main() -> None:
    model, inputs, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    source = session.get_inputs()[0]
    shape = [count] + list(source.shape[1:])
    x = np.fromfile(inputs, dtype="<f4").reshape(shape)
    # Each input's whole first output, flattened (a classifier's probabilities; a detector's [N, 5 + classes] rows).
    rows = [session.run(None, {source.name: x[i : i + 1]})[0].ravel().tolist() for i in range(count)]
    print(json.dumps({
        "probabilities": rows,
        "metadata": session.get_modelmeta().custom_metadata_map,
        "input": [source.name] + list(source.shape),
        "output": [session.get_outputs()[0].name] + list(session.get_outputs()[0].shape),
    }))


if __name__ == "__main__":
    main()
