#include <protobuf-c/protobuf-c.h>

/// Whether `string` is protobuf-c's shared empty default (not allocated by an unpack).
static inline int menagerie_is_protobuf_c_empty_string(const char *string) {
    return string == protobuf_c_empty_string;
}
