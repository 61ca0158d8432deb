#!/usr/bin/env python3
"""Python protobuf's side of ProtoJSONInteropTests (Tests/SchemaTests).

`samples`: fills a sample of every message of every proto (clients/python/generated) from its descriptor,
deterministically, in three variants: "full" (every field set to a non-default value: negatives, 64-bit values
beyond 2^53, unicode with escapes, bytes that need '+' and '/'), "extremes" (integer limits, NaN and the
infinities, enum numbers the schema does not define, non-BMP text) and "empty" (nothing set). Prints one JSON
document: per proto file its message names, and per sample its binary encoding (base64) and json_format's
MessageToJson text under each option set the Swift test compares.

`check`: reads [{"label", "type", "expected", "actual"}] (base64 binaries) on stdin and prints the labels whose
two binaries do not decode to the same message (compared re-serialized, so NaN equals NaN).

protobuf 3.21 (Debian's python3-protobuf) spells "emit defaults" `including_default_value_fields`; newer
releases renamed it `always_print_fields_with_no_presence`; both are handled.
"""
import base64
import inspect
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = os.path.join(HERE, "..", "..", "clients", "python", "generated")
sys.path.insert(0, GENERATED)

from google.protobuf import descriptor as _descriptor  # noqa: E402
from google.protobuf import json_format, symbol_database  # noqa: E402

FD = _descriptor.FieldDescriptor
DEFAULTS_OPTION = (
    "always_print_fields_with_no_presence"
    if "always_print_fields_with_no_presence" in inspect.signature(json_format.MessageToJson).parameters
    else "including_default_value_fields"
)
MAX_DEPTH = 3


def load_modules():
    """Imports every generated module; returns {proto path: [message full names, nested included]}."""
    import importlib

    files = {}
    for directory, _, names in sorted(os.walk(GENERATED)):
        for name in sorted(names):
            if not name.endswith("_pb2.py"):
                continue
            relative = os.path.relpath(os.path.join(directory, name), GENERATED)
            module = importlib.import_module(relative[: -len(".py")].replace(os.sep, "."))
            messages = []

            def walk(descriptor):
                messages.append(descriptor.full_name)
                for nested in descriptor.nested_types:
                    walk(nested)

            for descriptor in module.DESCRIPTOR.message_types_by_name.values():
                walk(descriptor)
            files[module.DESCRIPTOR.name] = messages
    return files


def message_class(full_name):
    return symbol_database.Default().GetSymbol(full_name)


SIGNED32 = {FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32}
UNSIGNED32 = {FD.TYPE_UINT32, FD.TYPE_FIXED32}
SIGNED64 = {FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64}
UNSIGNED64 = {FD.TYPE_UINT64, FD.TYPE_FIXED64}


def scalar(field, variant, index):
    """A non-default value for `field` (element `index` of a repeated field)."""
    n = field.number + index
    kind = field.type
    if variant == "full":
        if kind in SIGNED32:
            return -(1000 + n)
        if kind in UNSIGNED32:
            return 4_000_000_000 - n
        if kind in SIGNED64:
            return -(9_007_199_254_740_993 + n)
        if kind in UNSIGNED64:
            return 18_446_744_073_709_551_615 - n
        if kind == FD.TYPE_FLOAT:
            return 1.5 + n + 0.25
        if kind == FD.TYPE_DOUBLE:
            return 0.1 + n
        if kind == FD.TYPE_BOOL:
            return True
        if kind == FD.TYPE_STRING:
            return '%s %d: \u017elu\u0165ou\u010dk\u00fd k\u016f\u0148 \U0001F600 "q" \\ / \n\t\x01\x1f' % (field.name, n)
        if kind == FD.TYPE_BYTES:
            return bytes([0xFB, 0xFF, 0xBF, n % 256, 0, index])
        if kind == FD.TYPE_ENUM:
            return field.enum_type.values[-1].number
    else:  # extremes
        if kind in SIGNED32:
            return -(2**31) if n % 2 == 0 else 2**31 - 1
        if kind in UNSIGNED32:
            return 2**32 - 1
        if kind in SIGNED64:
            return -(2**63) if n % 2 == 0 else 2**63 - 1
        if kind in UNSIGNED64:
            return 2**64 - 1
        if kind in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
            finite_max = 3.4028234663852886e38 if kind == FD.TYPE_FLOAT else 1.7976931348623157e308
            return [math.nan, math.inf, -math.inf, finite_max, 5e-324 if kind == FD.TYPE_DOUBLE else 1e-45][n % 5]
        if kind == FD.TYPE_BOOL:
            return True
        if kind == FD.TYPE_STRING:
            return "\U0001D11E\u2028\u2029\x7f\ufeff \u00e9" + ("" if n % 2 else "\U0010FFFF")
        if kind == FD.TYPE_BYTES:
            return bytes([0xFF] * (1 + n % 3))  # 1, 2 or 3 bytes: '==', '=' and no padding
        if kind == FD.TYPE_ENUM:
            return 99 + n  # a number the schema does not define
    raise ValueError("unsupported field type %d of %s" % (kind, field.full_name))


def fill(message, variant, depth):
    for field in message.DESCRIPTOR.fields:
        if field.label == FD.LABEL_REPEATED:
            container = getattr(message, field.name)
            for index in range(2):
                if field.type == FD.TYPE_MESSAGE:
                    element = container.add()
                    if depth < MAX_DEPTH:
                        fill(element, variant, depth + 1)
                else:
                    container.append(scalar(field, variant, index))
        elif field.type == FD.TYPE_MESSAGE:
            if depth < MAX_DEPTH:
                child = getattr(message, field.name)
                child.SetInParent()
                fill(child, variant, depth + 1)
        else:
            setattr(message, field.name, scalar(field, variant, 0))


def to_json(message, defaults, proto_names):
    return json_format.MessageToJson(
        message, preserving_proto_field_name=proto_names, **{DEFAULTS_OPTION: defaults}
    )


def samples():
    files = load_modules()
    output = {"files": files, "defaultsOption": DEFAULTS_OPTION, "samples": []}
    for names in files.values():
        for name in names:
            for variant in ("full", "extremes", "empty"):
                message = message_class(name)()
                if variant != "empty":
                    fill(message, variant, 0)
                output["samples"].append({
                    "type": name,
                    "variant": variant,
                    "binary": base64.b64encode(message.SerializeToString(deterministic=True)).decode(),
                    "json": to_json(message, False, False),
                    "jsonDefaults": to_json(message, True, False),
                    "jsonProtoNames": to_json(message, True, True),
                })
    json.dump(output, sys.stdout, ensure_ascii=True)


def check():
    load_modules()
    mismatches = []
    for case in json.load(sys.stdin):
        cls = message_class(case["type"])
        expected, actual = cls(), cls()
        expected.ParseFromString(base64.b64decode(case["expected"]))
        try:
            actual.ParseFromString(base64.b64decode(case["actual"]))
        except Exception as error:  # noqa: BLE001 - any parse failure is a mismatch to report
            mismatches.append("%s: does not parse: %s" % (case["label"], error))
            continue
        if expected.SerializeToString(deterministic=True) != actual.SerializeToString(deterministic=True):
            mismatches.append("%s: expected %s, got %s" % (case["label"], expected, actual))
    json.dump(mismatches, sys.stdout)


if __name__ == "__main__":
    {"samples": samples, "check": check}[sys.argv[1]]()
