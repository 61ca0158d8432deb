#!/usr/bin/env bash
# Regenerates the API modules' sources from Proto/menagerie/**/*.proto. Run from anywhere. One API module per proto
# package: a service's package menagerie.NAME.v1 goes to the service folder named NAME in any case (Services/OCR,
# or Tests/Services/Guestbook for a test-only one) as <Name>API in <folder>/API/Generated and <Name>ProtoC in
# <folder>/ProtoC, the modules Package.swift's service(...) declares; Proto/modules.conf places the others (shared
# and test-fixture protos: RPCWire, JobsAPI, ...). The output is deterministic and committed (SchemaTests fails when
# it is stale). Per proto file:
#   <Swift directory>/<path_with_underscores>.pb.swift     Swift types and method descriptors       (schema-gen)
#   <service directory>/<path_with_underscores>.rpc.swift  per file with services: a service protocol, a client
#                                                          protocol and a typed client per service   (schema-gen)
#   <C directory>/menagerie/**/*.pb-c.c                    protobuf-c code                           (protoc-c)
#   <C directory>/include/menagerie/**/*.pb-c.h            its headers; the .c files include them by this path,
#                                                          SwiftPM exports include/ whole
# and per C target <C directory>/<C target>_registry.c, include/<C target>_registry.h: full message name ->
# &descriptor (schema-gen). And two lists, so that nothing else names every service or proto (schema-gen):
#   Services/Gateway/App/Generated/ServiceCommandGroups.swift   the gateway's <Name>Commands, one per service
#   Tests/SchemaTests/Generated/ProtoFiles.swift                every proto file's messages (ProtoJSONInteropTests)
#
# Steps: protoc writes one FileDescriptorSet (imports and comments included); schema-gen (Proto/Generator)
# turns it into the Swift files and the registries, plus a copy of the set for protoc-c in which proto3
# `optional` fields are plain one-field oneofs: protoc-c 1.4 refuses proto3 `optional`, the wire format
# is the same, and the Schema bridge reads presence from the oneof case. The copy leaves out the options file
# (menagerie/rpc/v1/options.proto, see there), descriptor.proto it imports (protobuf-c has no C for it) and the
# options themselves. protoc-c generates C from that copy, for the files schema-gen placed (it writes where each
# proto file's code went as modules.conf lines).
#
# Supported: proto3 scalars, string, bytes, enums, messages (singular and repeated), `optional`,
# nested messages and enums (as nested Swift types), imports between these files, services with rpcs
# of all four kinds (unary, server, client and bidirectional streaming), `option idempotency_level` and the
# method options of options.proto (`access`, required on every rpc; `max_request_bytes`), carried into the
# method descriptors (`ProtoMethodInfo.access`, `.maxRequestBytes`).
# Rejected by schema-gen with an error naming the element: proto2 (so groups and required), oneofs, maps,
# extensions outside the options file (and options it does not know), an rpc without an access level, enum
# aliases, files without a package, type names the generated Swift reserves (String, ...), a proto file
# neither a service folder nor modules.conf places.
# Strings travel as C strings through protobuf-c: text after an embedded NUL would be dropped, so decoding refuses
# such a string and `serialize(refusingNUL:)` (the server's answers, the client's requests) refuses to encode one.
#
# Needs protoc, protoc-c (Debian: protobuf-compiler protobuf-c-compiler) and swift. SwiftPM loads the
# whole package to build schema-gen, so the generated files must exist (git checkout them if deleted), or
# set SCHEMA_GEN=/path/to/schema-gen to use a prebuilt generator.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
proto_dir="$root/Proto"
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
# Where each proto file's code goes (modules.conf's lines and the services' by convention), as schema-gen placed it.
layout="$work/layout"
"$SCHEMA_GEN" "$work/schema.desc" "$root" "$work/out" "$work/protoc-c.desc" "$layout"

mkdir -p "$work/c"
# The files with code (the layout's first field): the options file has none and is not in protoc-c's copy.
mapfile -t c_protos < <(sed 's/#.*//' "$layout" | awk 'NF { print $1 }')
# From $work, so protoc-c reads the rewritten descriptors rather than the .proto files.
(cd "$work" && protoc-c --descriptor_set_in="$work/protoc-c.desc" --c_out="$work/c" "${c_protos[@]}")

# Everything generated succeeded: replace the previous output wholesale (drops files of deleted protos).
# The directories are the layout's third, fifth and seventh fields (the lists' files are rewritten in place).
mapfile -t directories < <(sed 's/#.*//' "$layout" | awk 'NF { print $3; print $5; if (NF == 7) print $7 }' | sort -u)
for directory in "${directories[@]}"; do
    rm -rf "${root:?}/$directory/menagerie" "$root/$directory/include/menagerie"
    rm -f "$root/$directory"/*.pb.swift "$root/$directory"/*.rpc.swift "$root/$directory"/*_registry.c "$root/$directory"/include/*_registry.h
done
cp -R "$work/out/." "$root/"
# protoc-c's output goes to the C directory of its proto file.
while read -r proto c_directory; do
    base=${proto%.proto}
    install -D -m 644 "$work/c/$base.pb-c.h" "$root/$c_directory/include/$base.pb-c.h"
    install -D -m 644 "$work/c/$base.pb-c.c" "$root/$c_directory/$base.pb-c.c"
done < <(sed 's/#.*//' "$layout" | awk 'NF { print $1, $5 }')

echo "generate.sh: regenerated ${#protos[@]} proto files" >&2

# The Python client's modules come from the same protos: regenerate them too, so one command keeps
# every generated file current (the suite checks both).
"$root/clients/python/generate.sh"
