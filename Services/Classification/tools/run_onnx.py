#!/usr/bin/env python3
"""Runs an exported ONNX model in onnxruntime, as a phone app would, for the tests that compare it with the service.

usage: run_onnx.py MODEL.onnx INPUTS.f32 COUNT [REPEAT]
INPUTS.f32 holds COUNT inputs, each [3, H, W] float32 little-endian, preprocessed as the model's metadata_props say.
Prints one JSON object: {"probabilities": [[...], ...], "metadata": {...}, "input": [...], "output": [...]}; with
REPEAT (menagerie-bench) also "timing": {"session_ms", "first_ms", "p50_ms"}: the session's creation, its first run
of the first input, and the median of REPEAT more.
"""
import json
import sys
import time

import numpy as np
import onnxruntime


def main() -> None:
    model, inputs, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    repeat = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    started = time.perf_counter()
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    session_ms = (time.perf_counter() - started) * 1000
    source = session.get_inputs()[0]
    shape = [count] + list(source.shape[1:])
    x = np.fromfile(inputs, dtype="<f4").reshape(shape)
    # Each input's whole first output, flattened (a classifier's probabilities; a detector's [N, 5 + classes] rows).
    timing = {}
    if repeat > 0:
        def run_once() -> float:
            started = time.perf_counter()
            session.run(None, {source.name: x[0:1]})
            return (time.perf_counter() - started) * 1000
        first = run_once()
        runs = sorted(run_once() for _ in range(repeat))
        timing = {"session_ms": session_ms, "first_ms": first, "p50_ms": runs[(len(runs) - 1) // 2]}
    rows = [session.run(None, {source.name: x[i : i + 1]})[0].ravel().tolist() for i in range(count)]
    print(json.dumps({
        "timing": timing,
        "probabilities": rows,
        "metadata": session.get_modelmeta().custom_metadata_map,
        "input": [source.name] + list(source.shape),
        "output": [session.get_outputs()[0].name] + list(session.get_outputs()[0].shape),
    }))


if __name__ == "__main__":
    main()
