"""Reads photos with RapidOCR (PP-OCR's Python runner on onnxruntime, its default models: the PP-OCRv6 small networks
the ocr service runs) for `menagerie-bench ocr`: each file once unmeasured (the first run of a size), then ROUNDS
times, timing the call alone (Python's start and the models' loading are not counted). One JSON line per file:
{"file", "seconds": [...], "text"}.

    compose/.cache/rapidocr/bin/python Tests/Benchmarks/peers/rapidocr_read.py ROUNDS FILE...
"""
import json
import logging
import sys
import time

from rapidocr import RapidOCR


def main():
    rounds, files = int(sys.argv[1]), sys.argv[2:]
    logging.disable(logging.INFO)
    engine = RapidOCR()
    for path in files:
        engine(path)
        seconds, text = [], ""
        for _ in range(rounds):
            started = time.perf_counter()
            result = engine(path)
            seconds.append(time.perf_counter() - started)
            text = " ".join(result.txts or ())
        print(json.dumps({"file": path, "seconds": seconds, "text": text}), flush=True)


if __name__ == "__main__":
    main()
