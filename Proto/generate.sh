#!/usr/bin/env bash
# Regenerates the Schema sources from Proto/menagerie/**/*.proto. Run from anywhere; the output is
# deterministic and committed:
#   Shared/MenagerieProtoC/menagerie/**/*.pb-c.c         protoc-c sources
#   Shared/MenagerieProtoC/include/menagerie/**/*.pb-c.h protoc-c headers (the .c files include them by this path)
#   Shared/MenagerieProtoC/include/menagerie_proto_registry.h  descriptor lookup by name      (schema-gen)
#   Shared/MenagerieProtoC/menagerie_proto_registry.c    full message name -> &descriptor      (schema-gen)
#   Shared/Schema/Generated/<proto path with _>.pb.swift Swift value types and services        (schema-gen)
#
# Steps: protoc writes one FileDescriptorSet (with imports and comments); schema-gen (Proto/Generator)
# turns it into the Swift files and the registry, plus a copy of the set for protoc-c in which proto3
# `optional` fields are plain one-field oneofs (protoc-c 1.4 refuses proto3 `optional`; the wire format
# is the same and the Schema bridge reads presence from the oneof case); protoc-c generates C from that.
#
# Supported: proto3 scalars, strings, bytes, enums, messages (singular and repeated), `optional`,
# nested messages and enums (nested Swift types), services with unary and server-streaming rpcs and
# `option idempotency_level`. Rejected by schema-gen with an error: proto2, oneofs, maps, groups,
# extensions, enum aliases, client streaming, files without a package.
#
# Needs protoc and protoc-c (Debian: protobuf-compiler protobuf-c-compiler) and swift.
# SCHEMA_GEN=/path/to/schema-gen uses a prebuilt generator instead of `swift build --product schema-gen`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
proto_dir="$root/Proto"
c_dir="$root/Shared/MenagerieProtoC"
swift_dir="$root/Shared/Schema/Generated"

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
(cd "$proto_dir" && protoc-c --descriptor_set_in="$work/protoc-c.desc" --c_out="$work/c" "${protos[@]}")

# Everything generated succeeded: replace the previous output wholesale (drops files of deleted protos).
rm -rf "$c_dir/menagerie" "$c_dir/include/menagerie" "$swift_dir"
rm -f "$c_dir/menagerie_proto_registry.c" "$c_dir/include/menagerie_proto_registry.h"
mkdir -p "$c_dir/include" "$swift_dir"
(cd "$work/c" && find menagerie -name '*.pb-c.h' -exec install -D -m 644 {} "$c_dir/include/{}" \;)
(cd "$work/c" && find menagerie -name '*.pb-c.c' -exec install -D -m 644 {} "$c_dir/{}" \;)
cp -R "$work/out/." "$root/"

echo "generate.sh: regenerated ${#protos[@]} proto files" >&2
