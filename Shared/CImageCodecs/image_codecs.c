#include "image_codecs.h"

#include <stdio.h>
#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static int sniff(const uint8_t *data, size_t length) {
    static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (length >= 8 && memcmp(data, png_signature, 8) == 0) return IMAGE_FORMAT_PNG;
    if (length >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return IMAGE_FORMAT_JPEG;
    return IMAGE_FORMAT_UNKNOWN;
}

static void fail(char *error, size_t capacity, const char *message) {
    if (capacity > 0) snprintf(error, capacity, "%s", message);
}

struct jpeg_failure {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
};

static void jpeg_exit(j_common_ptr info) {
    struct jpeg_failure *failure = (struct jpeg_failure *)info->err;
    (*info->err->format_message)(info, failure->message);
    longjmp(failure->jump, 1);
}

static void jpeg_silence(j_common_ptr info) { (void)info; }

/// Reads a JPEG's header and, when rgb is not NULL, its pixels. All libjpeg state stays in this frame.
static int jpeg_run(const uint8_t *data, size_t length, unsigned reduction, uint32_t *width, uint32_t *height,
                    uint8_t *rgb, size_t capacity, char *error, size_t error_capacity) {
    struct jpeg_decompress_struct info;
    struct jpeg_failure failure;
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_exit;
    failure.manager.output_message = jpeg_silence;
    failure.message[0] = 0;
    if (setjmp(failure.jump)) {
        jpeg_destroy_decompress(&info);
        fail(error, error_capacity, failure.message[0] ? failure.message : "JPEG decoding failed");
        return 1;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, (unsigned long)length);
    jpeg_read_header(&info, TRUE);
    if (width) *width = info.image_width;
    if (height) *height = info.image_height;
    if (rgb != NULL) {
        info.out_color_space = JCS_RGB;
        info.scale_num = 1;
        info.scale_denom = reduction;
        jpeg_start_decompress(&info);
        size_t stride = (size_t)info.output_width * 3;
        if (info.output_components != 3 || stride * info.output_height != capacity) {
            jpeg_destroy_decompress(&info);
            fail(error, error_capacity, "JPEG output size differs from its header");
            return 1;
        }
        while (info.output_scanline < info.output_height) {
            JSAMPROW row = rgb + stride * info.output_scanline;
            jpeg_read_scanlines(&info, &row, 1);
        }
        jpeg_finish_decompress(&info);
    }
    jpeg_destroy_decompress(&info);
    return 0;
}

int image_probe(const uint8_t *data, size_t length, int *format, uint32_t *width, uint32_t *height,
                char *error, size_t error_capacity) {
    *format = sniff(data, length);
    switch (*format) {
    case IMAGE_FORMAT_PNG: {
        png_image image;
        memset(&image, 0, sizeof image);
        image.version = PNG_IMAGE_VERSION;
        if (!png_image_begin_read_from_memory(&image, data, length)) {
            fail(error, error_capacity, image.message);
            png_image_free(&image);
            return 1;
        }
        *width = image.width;
        *height = image.height;
        png_image_free(&image);
        return 0;
    }
    case IMAGE_FORMAT_JPEG:
        return jpeg_run(data, length, 1, width, height, NULL, 0, error, error_capacity);
    default:
        fail(error, error_capacity, "neither PNG nor JPEG");
        return 1;
    }
}

int image_decode_rgb(const uint8_t *data, size_t length, unsigned reduction, uint8_t *rgb, size_t capacity,
                     char *error, size_t error_capacity) {
    int format = sniff(data, length);
    if (!(reduction == 1 || (format == IMAGE_FORMAT_JPEG && (reduction == 2 || reduction == 4 || reduction == 8)))) {
        fail(error, error_capacity, "unsupported reduction");
        return 1;
    }
    switch (format) {
    case IMAGE_FORMAT_PNG: {
        png_image image;
        memset(&image, 0, sizeof image);
        image.version = PNG_IMAGE_VERSION;
        if (!png_image_begin_read_from_memory(&image, data, length)) {
            fail(error, error_capacity, image.message);
            png_image_free(&image);
            return 1;
        }
        image.format = PNG_FORMAT_RGB;
        if (PNG_IMAGE_SIZE(image) != capacity) {
            png_image_free(&image);
            fail(error, error_capacity, "PNG output size differs from its header");
            return 1;
        }
        png_color black = {0, 0, 0};
        if (!png_image_finish_read(&image, &black, rgb, 0, NULL)) {
            fail(error, error_capacity, image.message);
            png_image_free(&image);
            return 1;
        }
        return 0;
    }
    case IMAGE_FORMAT_JPEG:
        return jpeg_run(data, length, reduction, NULL, NULL, rgb, capacity, error, error_capacity);
    default:
        fail(error, error_capacity, "neither PNG nor JPEG");
        return 1;
    }
}

int image_encode_jpeg(const uint8_t *rgb, uint32_t width, uint32_t height, int quality, uint8_t **out,
                      size_t *out_length, char *error, size_t error_capacity) {
    struct jpeg_compress_struct info;
    struct jpeg_failure failure;
    unsigned char *buffer = NULL;
    unsigned long size = 0;
    *out = NULL;
    *out_length = 0;
    if (width == 0 || height == 0 || quality < 1 || quality > 100) {
        fail(error, error_capacity, "JPEG encoding needs a positive size and a quality of 1-100");
        return 1;
    }
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_exit;
    failure.manager.output_message = jpeg_silence;
    failure.message[0] = 0;
    if (setjmp(failure.jump)) {
        fail(error, error_capacity, failure.message[0] ? failure.message : "JPEG encoding failed");
        jpeg_destroy_compress(&info);
        free(buffer);
        return 1;
    }
    jpeg_create_compress(&info);
    jpeg_mem_dest(&info, &buffer, &size);
    info.image_width = width;
    info.image_height = height;
    info.input_components = 3;
    info.in_color_space = JCS_RGB;
    jpeg_set_defaults(&info);
    jpeg_set_quality(&info, quality, TRUE);
    jpeg_start_compress(&info, TRUE);
    while (info.next_scanline < info.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)info.next_scanline * width * 3);
        jpeg_write_scanlines(&info, &row, 1);
    }
    jpeg_finish_compress(&info);
    jpeg_destroy_compress(&info);
    *out = buffer;
    *out_length = size;
    return 0;
}
