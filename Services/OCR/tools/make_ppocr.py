#!/usr/bin/env python3
"""Builds the OCR service's PP-OCR models: PaddleOCR's PP-OCRv6 small text detection and recognition networks from
PyPI's rapidocr 3.10.0 wheel (Apache-2.0), the recognition network re-exported so Debian's OpenCV 4.6 DNN runs it.

    make_ppocr.py RAPIDOCR_WHEEL OUTPUT_DIR

Run by compose/compose (install_ppocr) in a venv with PyPI's onnx, onnxsim and onnxruntime (pinned there), after
`pip download --no-deps rapidocr==3.10.0`. Nothing here runs at service time; the service never fetches.

Writes OUTPUT_DIR/
  det-landscape.onnx, det-portrait.onnx
                   the detection network with static shapes: input 1 x 3 x 736 x 992 and 1 x 3 x 992 x 736 (the
                   photo scaled to fit, padded), output 1 x 1 x H x W, each pixel's probability of being text
  rec.onnx         the recognition network with static shapes: input 1 x 3 x 48 x 320 (a line crop, height 48,
                   padded to width 320), output 1 x 40 x 18710 (per column of 8 pixels, softmax over blank, the
                   characters, space)
  characters.txt   the recognition network's `character` metadata, one per line (index i + 1 of the output;
                   0 is CTC's blank, the last is a space)
  ppocr.json       name, the wheel's SHA-256, every file with its SHA-256, the input sizes and normalisation

Why static detection networks: OpenCV 4.6 imports the shipped one and runs it at any size, but wrongly (on a
rendered display 8 % of the probability map's pixels fell on the other side of the 0.3 threshold than under
onnxruntime at 640 x 640, 18 % at 736 x 1152); with the input's shape fixed by onnxsim it matches (max difference
4e-4) — at that shape only: 4.6 bakes the declared shape into the graph, so each canvas is its own file. 736 is
RapidOCR's default shorter side.

Why the re-export of the recognition network: OpenCV 4.6's ONNX importer refuses the shipped recognition network ("Node [Shape] …
!isDynamicShape in parseShape", its width is dynamic). onnxsim with a fixed input shape folds the shape arithmetic
away; then two more things 4.6 cannot import are rewritten, without changing what is computed:
  - Gemm with transB = 0 and a bias (its FullyConnected layer asserts the bias size): MatMul followed by Add.
  - Mul/Add/Sub/Div of a tensor and a lower-rank constant (the layer norms' scale and shift, [120] against
    [1, 40, 120]): 4.6 makes a Scale layer with the wrong axis; the constant is broadcast to the tensor's full
    static shape, which 4.6 treats as a plain element-wise operation.
The result is checked against the shipped network under onnxruntime on random input (max difference under 1e-3,
the same best class everywhere), as are the static detection networks before it is written.

Both networks take channels in BGR order (as PaddleOCR feeds what OpenCV decodes), pixels p in 0..255 normalised
as (p / 255 - 0.5) / 0.5.
"""
import hashlib
import json
import os
import sys
import zipfile

WHEEL_SHA256 = "2fc34e26cd0f48514804a94f8832283039c7334076bff60768b1fed9ad068050"
DET = ("rapidocr/models/PP-OCRv6_det_small.onnx", "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f")
REC = ("rapidocr/models/PP-OCRv6_rec_small.onnx", "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884")
REC_HEIGHT, REC_WIDTH = 48, 320
DET_CANVASES = {"det-landscape.onnx": (736, 992), "det-portrait.onnx": (992, 736)}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def static_recognizer(model):
    import numpy as np
    import onnx
    import onnxsim
    from onnx import helper, numpy_helper

    simplified, ok = onnxsim.simplify(model, overwrite_input_shapes={"x": [1, 3, REC_HEIGHT, REC_WIDTH]},
                                      skipped_optimizers=["fuse_matmul_add_bias_into_gemm"])
    if not ok:
        sys.exit("make_ppocr: onnxsim could not simplify the recognition network")
    graph = simplified.graph
    nodes = []
    for node in graph.node:
        if node.op_type == "Gemm" and len(node.input) == 3:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if attrs.get("transA", 0) or attrs.get("transB", 0) or attrs.get("alpha", 1.0) != 1.0 \
                    or attrs.get("beta", 1.0) != 1.0:
                sys.exit(f"make_ppocr: unexpected Gemm attributes in {node.name}: {attrs}")
            product = node.output[0] + "_matmul"
            nodes.append(helper.make_node("MatMul", [node.input[0], node.input[1]], [product], name=node.name + "_matmul"))
            nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]], name=node.name + "_bias"))
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)

    inferred = onnx.shape_inference.infer_shapes(simplified)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    constants = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type not in ("Mul", "Add", "Sub", "Div"):
            continue
        for index, name in enumerate(list(node.input[:2])):
            other = node.input[1 - index]
            if name not in constants or other not in shapes:
                continue
            value = numpy_helper.to_array(constants[name])
            full = shapes[other]
            if value.size > 1 and list(value.shape) != full and value.ndim < len(full) and 0 not in full:
                expanded = f"{name}__{'x'.join(map(str, full))}"
                if expanded not in constants:
                    tensor = numpy_helper.from_array(np.ascontiguousarray(np.broadcast_to(value, full)), expanded)
                    graph.initializer.append(tensor)
                    constants[expanded] = tensor
                node.input[index] = expanded
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(simplified)
    return simplified


def static_detector(model, height, width):
    import onnx
    import onnxsim

    simplified, ok = onnxsim.simplify(model, overwrite_input_shapes={"x": [1, 3, height, width]})
    if not ok:
        sys.exit("make_ppocr: onnxsim could not simplify the detection network")
    onnx.checker.check_model(simplified)
    return simplified


def check_same(original, rewritten, shape):
    import numpy as np
    import onnxruntime

    # Random input makes the detector's map nearly empty: a picture of bars (text-like strokes) is fed as well.
    x = np.random.RandomState(40).uniform(-1, 1, shape).astype(np.float32)
    x[:, :, shape[2] // 3: shape[2] // 3 + 24, ::6] = -1
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    want = onnxruntime.InferenceSession(original.SerializeToString(), options).run(None, {"x": x})[0]
    got = onnxruntime.InferenceSession(rewritten.SerializeToString(), options).run(None, {"x": x})[0]
    difference = float(abs(want - got).max())
    same_classes = want.ndim != 3 or (want.argmax(-1) == got.argmax(-1)).all()
    if want.shape != got.shape or difference > 1e-3 or not same_classes:
        sys.exit(f"make_ppocr: a re-exported network differs from the shipped one ({difference})")
    return difference


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_ppocr.py RAPIDOCR_WHEEL OUTPUT_DIR")
    wheel, out = sys.argv[1], sys.argv[2]
    import onnx

    with open(wheel, "rb") as f:
        if sha256(f.read()) != WHEEL_SHA256:
            sys.exit(f"make_ppocr: {wheel} is not the pinned rapidocr 3.10.0 wheel (SHA-256 differs)")
    with zipfile.ZipFile(wheel) as archive:
        det, rec = archive.read(DET[0]), archive.read(REC[0])
    for (path, want), data in ((DET, det), (REC, rec)):
        if sha256(data) != want:
            sys.exit(f"make_ppocr: {path} in the wheel is not the pinned model (SHA-256 differs)")

    shipped = onnx.load_from_string(rec)
    characters = next((p.value for p in shipped.metadata_props if p.key == "character"), None)
    if characters is None:
        sys.exit("make_ppocr: the recognition network has no `character` metadata")
    characters = characters.split("\n")
    width = shipped.graph.output[0].type.tensor_type.shape.dim[2].dim_value
    if width != len(characters) + 2:
        sys.exit(f"make_ppocr: {len(characters)} characters for {width} classes (blank + characters + space)")
    static = static_recognizer(shipped)
    difference = check_same(shipped, static, (1, 3, REC_HEIGHT, REC_WIDTH))
    detectors = {}
    shipped_detector = onnx.load_from_string(det)
    for name, (height, width) in DET_CANVASES.items():
        detectors[name] = static_detector(shipped_detector, height, width)
        difference = max(difference, check_same(shipped_detector, detectors[name], (1, 3, height, width)))

    os.makedirs(out, exist_ok=True)
    files = {**{name: model.SerializeToString() for name, model in detectors.items()}, "rec.onnx": static.SerializeToString(),
             "characters.txt": ("\n".join(characters) + "\n").encode("utf-8")}
    for name, data in files.items():
        with open(os.path.join(out, name + ".part"), "wb") as f:
            f.write(data)
        os.replace(os.path.join(out, name + ".part"), os.path.join(out, name))
    manifest = {
        "name": "PP-OCRv6 small (rapidocr 3.10.0, Apache-2.0)",
        "wheel_sha256": WHEEL_SHA256,
        "files": {name: sha256(data) for name, data in files.items()},
        "recognition_input": [1, 3, REC_HEIGHT, REC_WIDTH],
        "detection_inputs": {name: [1, 3, h, w] for name, (h, w) in DET_CANVASES.items()},
        "max_difference": difference,
        "characters": len(characters),
        "normalisation": "BGR, (p / 255 - 0.5) / 0.5",
    }
    with open(os.path.join(out, "ppocr.json.part"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(os.path.join(out, "ppocr.json.part"), os.path.join(out, "ppocr.json"))
    print(f"make_ppocr: wrote {out} (networks re-exported, max difference {difference:.2e})")


if __name__ == "__main__":
    main()
