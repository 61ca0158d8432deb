// PNG (libpng's simplified API), JPEG (libjpeg-turbo), WebP (libwebp) and HEIF/HEIC (libheif: the iPhone's
// default) decoding to 8-bit RGB behind a tiny C API, one place for every service that reads photos.
// It lives in C because libjpeg reports errors by longjmp, which must never cross Swift frames.
// A file cut short or damaged is an error, never an image with grey where the missing data was.
// The size is read first (image_probe) so the caller can refuse an image too large before decoding it.
#ifndef MENAGERIE_IMAGE_CODECS_H
#define MENAGERIE_IMAGE_CODECS_H

#include <stddef.h>
#include <stdint.h>

#define IMAGE_FORMAT_UNKNOWN 0
#define IMAGE_FORMAT_PNG 1
#define IMAGE_FORMAT_JPEG 2
#define IMAGE_FORMAT_WEBP 3
#define IMAGE_FORMAT_HEIF 4

/// The format by the first bytes (signature or ISO BMFF brand), IMAGE_FORMAT_UNKNOWN when none of these.
int image_sniff(const uint8_t *data, size_t length);

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

/// Encodes 8-bit RGB as a lossy WebP of `quality` (1–100) into a malloc'd buffer the caller frees. For tests.
int image_encode_webp(const uint8_t *rgb, uint32_t width, uint32_t height, int quality, uint8_t **out,
                      size_t *out_length, char *error, size_t error_capacity);

/// Encodes 8-bit RGB as a HEIC (HEVC still, libheif with x265) of `quality` (1–100) into a malloc'd buffer the
/// caller frees. For tests and benchmarks that need photos as iPhones write them.
int image_encode_heic(const uint8_t *rgb, uint32_t width, uint32_t height, int quality, uint8_t **out,
                      size_t *out_length, char *error, size_t error_capacity);

#endif
