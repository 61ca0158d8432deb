#!/usr/bin/env bash
# Regenerates clients/python/generated from Proto/ with `protoc --python_out` (Debian: protobuf-compiler;
# the modules need python3-protobuf at run time). The output is committed; `generate.sh --check` exits 1
# when it differs from what protoc makes now (the interop tests run it, so stale modules fail the suite).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$here/generated"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t protos < <(cd "$root/Proto" && find menagerie -name '*.proto' | LC_ALL=C sort)
mkdir -p "$work/generated"
(cd "$root/Proto" && protoc -I . --python_out="$work/generated" "${protos[@]}")

if [ "${1:-}" = "--check" ]; then
    if ! diff -r -x __pycache__ "$work/generated" "$out" >&2; then
        echo "generate.sh: clients/python/generated is stale; run clients/python/generate.sh and commit" >&2
        exit 1
    fi
    exit 0
fi
rm -rf "$out"
cp -R "$work/generated" "$out"
echo "generate.sh: regenerated ${#protos[@]} proto files into clients/python/generated" >&2
