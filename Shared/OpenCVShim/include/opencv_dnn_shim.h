#ifndef OPENCV_DNN_SHIM_H
#define OPENCV_DNN_SHIM_H

// A plain C API over OpenCV's DNN module, enough to run an ONNX model: load from bytes, forward one float tensor.
// Every C++ exception is caught here; a failing call returns non-zero and leaves its message (without OpenCV's
// source location noise) for the calling thread in dnn_last_error(), valid until that thread's next failure.
// A network is not thread-safe: callers run one forward at a time per network.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dnn_network_s *dnn_network;

/// The calling thread's last error message ("" when none).
const char *dnn_last_error(void);

/// Parses an ONNX model from memory.
int dnn_load_onnx(const uint8_t *bytes, size_t count, dnn_network *out);

void dnn_free(dnn_network network);

/// Runs the network on `input` (float32, `dims` sizes in `shape`) and returns its first output: `*output` is
/// malloc'd (free it with dnn_free_floats), its sizes go to `out_shape` (room for `*out_dims` of them; set to the
/// number used).
int dnn_forward(dnn_network network, const float *input, const int *shape, int dims,
                float **output, int *out_shape, int *out_dims);

void dnn_free_floats(float *values);

#ifdef __cplusplus
}
#endif

#endif
