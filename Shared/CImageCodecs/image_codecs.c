#include "image_codecs.h"

#include <stdio.h>
#include <jpeglib.h>
#include <jerror.h>
#include <libheif/heif.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <webp/decode.h>
#include <webp/encode.h>

/// An ISO base media file whose `ftyp` box names a HEIF brand (HEVC-coded stills and sequences, and the
/// structural `mif1`/`msf1` brands iPhones list). AVIF is HEIF too but needs an AV1 decoder: left to libheif.
static int is_heif(const uint8_t *data, size_t length) {
    if (length < 12 || memcmp(data + 4, "ftyp", 4) != 0) return 0;
    static const char *brands[] = {"heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1", "avif"};
    for (size_t i = 0; i < sizeof brands / sizeof brands[0]; i++)
        if (memcmp(data + 8, brands[i], 4) == 0) return 1;
    return 0;
}

int image_sniff(const uint8_t *data, size_t length) {
    static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (length >= 8 && memcmp(data, png_signature, 8) == 0) return IMAGE_FORMAT_PNG;
    if (length >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return IMAGE_FORMAT_JPEG;
    if (length >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0) return IMAGE_FORMAT_WEBP;
    if (is_heif(data, length)) return IMAGE_FORMAT_HEIF;
    return IMAGE_FORMAT_UNKNOWN;
}

static int sniff(const uint8_t *data, size_t length) { return image_sniff(data, length); }

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

/// libjpeg only warns when the data ends early or is damaged, and decodes on with grey (or garbage) in place of
/// the missing pixels: a photo cut to 2 KB of 59 KB decoded "fine". Those warnings are failures here; harmless
/// ones (extraneous bytes between markers, unknown APP segments) stay silent.
static void jpeg_warn(j_common_ptr info, int level) {
    if (level >= 0) return;  // trace messages
    switch (info->err->msg_code) {
    case JWRN_JPEG_EOF:
        snprintf(((struct jpeg_failure *)info->err)->message, JMSG_LENGTH_MAX,
                 "the file is truncated: its JPEG data ends before the image does");
        longjmp(((struct jpeg_failure *)info->err)->jump, 1);
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
        (*info->err->format_message)(info, ((struct jpeg_failure *)info->err)->message);
        longjmp(((struct jpeg_failure *)info->err)->jump, 1);
    default:
        return;
    }
}

/// Reads a JPEG's header and, when rgb is not NULL, its pixels. All libjpeg state stays in this frame.
static int jpeg_run(const uint8_t *data, size_t length, unsigned reduction, uint32_t *width, uint32_t *height,
                    uint8_t *rgb, size_t capacity, char *error, size_t error_capacity) {
    struct jpeg_decompress_struct info;
    struct jpeg_failure failure;
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_exit;
    failure.manager.output_message = jpeg_silence;
    failure.manager.emit_message = jpeg_warn;
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

/// The primary image of a HEIF file (what a viewer shows; iPhones add thumbnails and depth maps beside it).
/// Its size is after the file's rotation and mirroring (irot/imir), which libheif applies when decoding.
struct heif_primary {
    struct heif_context *context;
    struct heif_image_handle *handle;
};

static void heif_primary_close(struct heif_primary *primary) {
    if (primary->handle) heif_image_handle_release(primary->handle);
    if (primary->context) heif_context_free(primary->context);
    primary->handle = NULL;
    primary->context = NULL;
}

static int heif_primary_open(const uint8_t *data, size_t length, struct heif_primary *primary, char *error,
                             size_t error_capacity) {
    primary->context = heif_context_alloc();
    primary->handle = NULL;
    if (!primary->context) {
        fail(error, error_capacity, "out of memory");
        return 1;
    }
    struct heif_error status = heif_context_read_from_memory_without_copy(primary->context, data, length, NULL);
    if (status.code == heif_error_Ok)
        status = heif_context_get_primary_image_handle(primary->context, &primary->handle);
    if (status.code != heif_error_Ok) {
        // A file cut short most often loses the boxes libheif looks for at its end (or the data they point to).
        fail(error, error_capacity, status.message && status.message[0] ? status.message : "HEIF reading failed");
        heif_primary_close(primary);
        return 1;
    }
    return 0;
}

static int heif_decode_rgb(const uint8_t *data, size_t length, uint8_t *rgb, size_t capacity, char *error,
                           size_t error_capacity) {
    struct heif_primary primary;
    if (heif_primary_open(data, length, &primary, error, error_capacity)) return 1;
    struct heif_image *image = NULL;
    struct heif_error status =
        heif_decode_image(primary.handle, &image, heif_colorspace_RGB, heif_chroma_interleaved_RGB, NULL);
    if (status.code != heif_error_Ok) {
        fail(error, error_capacity, status.message && status.message[0] ? status.message : "HEIF decoding failed");
        heif_primary_close(&primary);
        return 1;
    }
    int width = heif_image_get_width(image, heif_channel_interleaved);
    int height = heif_image_get_height(image, heif_channel_interleaved);
    int stride = 0;
    const uint8_t *plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride);
    int result = 0;
    if (!plane || width <= 0 || height <= 0 || (size_t)width * (size_t)height * 3 != capacity) {
        fail(error, error_capacity, "HEIF output size differs from its header");
        result = 1;
    } else {
        for (int y = 0; y < height; y++) memcpy(rgb + (size_t)y * width * 3, plane + (size_t)y * stride, (size_t)width * 3);
    }
    heif_image_release(image);
    heif_primary_close(&primary);
    return result;
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
    case IMAGE_FORMAT_WEBP: {
        int w = 0, h = 0;
        if (!WebPGetInfo(data, length, &w, &h)) {
            fail(error, error_capacity, "not a readable WebP header");
            return 1;
        }
        *width = (uint32_t)w;
        *height = (uint32_t)h;
        return 0;
    }
    case IMAGE_FORMAT_HEIF: {
        struct heif_primary primary;
        if (heif_primary_open(data, length, &primary, error, error_capacity)) return 1;
        *width = (uint32_t)heif_image_handle_get_width(primary.handle);
        *height = (uint32_t)heif_image_handle_get_height(primary.handle);
        heif_primary_close(&primary);
        return 0;
    }
    default:
        fail(error, error_capacity, "not a PNG, JPEG, WebP or HEIF image");
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
    case IMAGE_FORMAT_WEBP: {
        int w = 0, h = 0;
        if (!WebPGetInfo(data, length, &w, &h) || (size_t)w * (size_t)h * 3 != capacity) {
            fail(error, error_capacity, "WebP output size differs from its header");
            return 1;
        }
        // Fails when the data ends early: libwebp decodes nothing it has not received.
        if (!WebPDecodeRGBInto(data, length, rgb, capacity, w * 3)) {
            fail(error, error_capacity, "the WebP data is truncated or damaged");
            return 1;
        }
        return 0;
    }
    case IMAGE_FORMAT_HEIF:
        return heif_decode_rgb(data, length, rgb, capacity, error, error_capacity);
    default:
        fail(error, error_capacity, "not a PNG, JPEG, WebP or HEIF image");
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

int image_encode_webp(const uint8_t *rgb, uint32_t width, uint32_t height, int quality, uint8_t **out,
                      size_t *out_length, char *error, size_t error_capacity) {
    *out = NULL;
    *out_length = 0;
    if (width == 0 || height == 0 || width > 16383 || height > 16383 || quality < 1 || quality > 100) {
        fail(error, error_capacity, "WebP encoding needs a size of 1-16383 a side and a quality of 1-100");
        return 1;
    }
    uint8_t *encoded = NULL;
    size_t size = WebPEncodeRGB(rgb, (int)width, (int)height, (int)width * 3, (float)quality, &encoded);
    if (size == 0 || !encoded) {
        fail(error, error_capacity, "WebP encoding failed");
        return 1;
    }
    // Handed back in memory the caller frees with free(), like the other encoders' output.
    *out = malloc(size);
    if (!*out) {
        WebPFree(encoded);
        fail(error, error_capacity, "out of memory");
        return 1;
    }
    memcpy(*out, encoded, size);
    WebPFree(encoded);
    *out_length = size;
    return 0;
}

struct growing_buffer {
    uint8_t *bytes;
    size_t length;
    int failed;
};

static struct heif_error heif_append(struct heif_context *context, const void *data, size_t size, void *userdata) {
    (void)context;
    struct growing_buffer *buffer = userdata;
    uint8_t *grown = realloc(buffer->bytes, buffer->length + size);
    if (!grown) {
        buffer->failed = 1;
        struct heif_error error = {heif_error_Memory_allocation_error, heif_suberror_Unspecified, "out of memory"};
        return error;
    }
    memcpy(grown + buffer->length, data, size);
    buffer->bytes = grown;
    buffer->length += size;
    struct heif_error ok = {heif_error_Ok, heif_suberror_Unspecified, "ok"};
    return ok;
}

int image_encode_heic(const uint8_t *rgb, uint32_t width, uint32_t height, int quality, uint8_t **out,
                      size_t *out_length, char *error, size_t error_capacity) {
    *out = NULL;
    *out_length = 0;
    if (width == 0 || height == 0 || quality < 1 || quality > 100) {
        fail(error, error_capacity, "HEIC encoding needs a positive size and a quality of 1-100");
        return 1;
    }
    if (!heif_have_encoder_for_format(heif_compression_HEVC)) {
        fail(error, error_capacity, "this libheif has no HEVC encoder (Debian's libheif1 brings x265)");
        return 1;
    }
    struct heif_context *context = heif_context_alloc();
    struct heif_encoder *encoder = NULL;
    struct heif_image *image = NULL;
    struct growing_buffer buffer = {NULL, 0, 0};
    struct heif_error status = heif_context_get_encoder_for_format(context, heif_compression_HEVC, &encoder);
    if (status.code == heif_error_Ok) status = heif_encoder_set_lossy_quality(encoder, quality);
    if (status.code == heif_error_Ok)
        status = heif_image_create((int)width, (int)height, heif_colorspace_RGB, heif_chroma_interleaved_RGB, &image);
    if (status.code == heif_error_Ok)
        status = heif_image_add_plane(image, heif_channel_interleaved, (int)width, (int)height, 8);
    if (status.code == heif_error_Ok) {
        int stride = 0;
        uint8_t *plane = heif_image_get_plane(image, heif_channel_interleaved, &stride);
        for (uint32_t y = 0; y < height; y++) memcpy(plane + (size_t)y * stride, rgb + (size_t)y * width * 3, (size_t)width * 3);
        status = heif_context_encode_image(context, image, encoder, NULL, NULL);
    }
    if (status.code == heif_error_Ok) {
        struct heif_writer writer = {1, heif_append};
        status = heif_context_write(context, &writer, &buffer);
    }
    int result = 0;
    if (status.code != heif_error_Ok || buffer.failed) {
        fail(error, error_capacity, status.message && status.message[0] ? status.message : "HEIC encoding failed");
        free(buffer.bytes);
        result = 1;
    } else {
        *out = buffer.bytes;
        *out_length = buffer.length;
    }
    if (image) heif_image_release(image);
    if (encoder) heif_encoder_release(encoder);
    heif_context_free(context);
    return result;
}
