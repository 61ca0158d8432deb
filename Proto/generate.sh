#!/usr/bin/env bash
# Regenerates the Schema sources from Proto/menagerie/**/*.proto. Run from anywhere. The output is
# deterministic and committed (SchemaTests fails when it is stale):
#   Shared/Schema/Generated/<path_with_underscores>.pb.swift    Swift types and method descriptors (schema-gen)
#   Shared/ServiceAPI/Generated/<path_with_underscores>.rpc.swift
#                                                               per file with services: a service protocol
#                                                               per service and a typed client (schema-gen)
#   Shared/MenagerieProtoC/menagerie/**/*.pb-c.c                protobuf-c code                (protoc-c)
#   Shared/MenagerieProtoC/include/menagerie/**/*.pb-c.h        its headers; the .c files include them by
#                                                               this path, SwiftPM exports include/ whole
#   Shared/MenagerieProtoC/menagerie_proto_registry.c, include/menagerie_proto_registry.h
#                                                               full message name -> &descriptor (schema-gen)
#
# Steps: protoc writes one FileDescriptorSet (imports and comments included); schema-gen (Proto/Generator)
# turns it into the Swift files and the registry, plus a copy of the set for protoc-c in which proto3
# `optional` fields are plain one-field oneofs: protoc-c 1.4 refuses proto3 `optional`, the wire format
# is the same, and the Schema bridge reads presence from the oneof case. protoc-c generates C from that copy.
#
# Supported: proto3 scalars, string, bytes, enums, messages (singular and repeated), `optional`,
# nested messages and enums (as nested Swift types), imports between these files, services with rpcs
# of all four kinds (unary, server, client and bidirectional streaming) and `option idempotency_level`.
# Rejected by schema-gen with an error naming the element: proto2 (so groups and required), oneofs, maps,
# extensions, enum aliases, files without a package, type names the generated Swift reserves (String, ...).
# Strings travel as C strings through protobuf-c: text after an embedded NUL is dropped.
#
# Needs protoc, protoc-c (Debian: protobuf-compiler protobuf-c-compiler) and swift. SwiftPM loads the
# whole package to build schema-gen, so the generated files must exist (git checkout them if deleted), or
# set SCHEMA_GEN=/path/to/schema-gen to use a prebuilt generator.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
proto_dir="$root/Proto"
c_dir="$root/Shared/MenagerieProtoC"
swift_dir="$root/Shared/Schema/Generated"
service_api_dir="$root/Shared/ServiceAPI/Generated"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mapfile -t protos < <(cd "$proto_dir" && find menagerie -name '*.proto' | LC_ALL=C sort)
if [ ${#protos[@]} -eq 0 ]; then
    echo "generate.sh: no .proto files under $proto_dir/menagerie" >&2
    exit 1
fi

protoc -I "$proto_dir" --descriptor_set_out="$work/schema.desc" --include_imports --include_source_info \
    "${protos[@]}"

if [ -z "${SCHEMA_GEN:-}" ]; then
    swift build --package-path "$root" --product schema-gen >&2
    SCHEMA_GEN="$(swift build --package-path "$root" --show-bin-path)/schema-gen"
fi
mkdir -p "$work/out"
"$SCHEMA_GEN" "$work/schema.desc" "$work/out" "$work/protoc-c.desc"

mkdir -p "$work/c"
# From $work, so protoc-c reads the rewritten descriptors rather than the .proto files.
(cd "$work" && protoc-c --descriptor_set_in="$work/protoc-c.desc" --c_out="$work/c" "${protos[@]}")

# Everything generated succeeded: replace the previous output wholesale (drops files of deleted protos).
rm -rf "$c_dir/menagerie" "$c_dir/include/menagerie" "$swift_dir" "$service_api_dir"
rm -f "$c_dir/menagerie_proto_registry.c" "$c_dir/include/menagerie_proto_registry.h"
mkdir -p "$c_dir/include" "$swift_dir"
(cd "$work/c" && find menagerie -name '*.pb-c.h' -exec install -D -m 644 {} "$c_dir/include/{}" \;)
(cd "$work/c" && find menagerie -name '*.pb-c.c' -exec install -D -m 644 {} "$c_dir/{}" \;)
cp -R "$work/out/." "$root/"

echo "generate.sh: regenerated ${#protos[@]} proto files" >&2

# The Python client's modules come from the same protos: regenerate them too, so one command keeps
# every generated file current (the suite checks both).
"$root/clients/python/generate.sh"
