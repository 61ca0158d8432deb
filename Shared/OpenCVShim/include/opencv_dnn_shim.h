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

/// A network's image input from 8-bit RGB pixels (`width` × `height`, rows top to bottom): the rectangle at
/// (`crop_x`, `crop_y`) of `crop_width` × `crop_height` resized to `width_out` × `height_out` (area averaging when
/// shrinking, bilinear when enlarging), at the top-left of a `canvas_width` × `canvas_height` canvas, channels in
/// BGR order when `bgr`, each value (p / 255 - mean) / std and the canvas beyond the picture 0. `output` has room
/// for 3 × canvas_width × canvas_height floats (channel-first).
int dnn_image_input(const uint8_t *rgb, int width, int height, int crop_x, int crop_y, int crop_width, int crop_height,
                    int width_out, int height_out, int canvas_width, int canvas_height, int bgr, float mean, float std,
                    float *output);

#ifdef __cplusplus
}
#endif

#endif
