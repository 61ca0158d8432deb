// PNG (libpng's simplified API) and JPEG (libjpeg-turbo) decoding to 8-bit RGB behind a tiny C API.
// It lives in C because libjpeg reports errors by longjmp, which must never cross Swift frames.
// The size is read first (image_probe) so the caller can refuse an image too large before decoding it.
#ifndef MENAGERIE_IMAGE_CODECS_H
#define MENAGERIE_IMAGE_CODECS_H

#include <stddef.h>
#include <stdint.h>

#define IMAGE_FORMAT_UNKNOWN 0
#define IMAGE_FORMAT_PNG 1
#define IMAGE_FORMAT_JPEG 2

/// Writes the format and size from the header only; returns 0, or nonzero with a message in `error`.
int image_probe(const uint8_t *data, size_t length, int *format, uint32_t *width, uint32_t *height,
                char *error, size_t error_capacity);

/// Decodes into `rgb`, which holds width * height * 3 bytes exactly (sizes from image_probe); alpha is dropped
/// over black, grey is expanded. A JPEG is decoded at 1/`reduction` of its size (1, 2, 4 or 8: libjpeg's DCT
/// scaling, which skips most of the work), each side then ceil(side / reduction); a PNG takes only 1. Returns 0, or
/// nonzero with a message in `error`.
int image_decode_rgb(const uint8_t *data, size_t length, unsigned reduction, uint8_t *rgb, size_t capacity,
                     char *error, size_t error_capacity);

/// Encodes 8-bit RGB (width * height * 3 bytes) as a baseline JPEG of `quality` (1–100) into a buffer this call
/// allocates with malloc: the caller frees `*out`. Returns 0, or nonzero with a message in `error`.
int image_encode_jpeg(const uint8_t *rgb, uint32_t width, uint32_t height, int quality, uint8_t **out,
                      size_t *out_length, char *error, size_t error_capacity);

#endif
