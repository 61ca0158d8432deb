// Keep this file small: it is the only translation unit that sees OpenCV's headers.
#include "opencv_dnn_shim.h"

#include <opencv2/dnn.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

struct dnn_network_s {
    cv::dnn::Net net;
};

static thread_local std::string last_error;

const char *dnn_last_error(void) { return last_error.c_str(); }

template <typename Body> static int guarded(Body body) {
    try {
        last_error.clear();
        return body();
    } catch (const cv::Exception &error) {
        last_error = error.err.empty() ? error.what() : error.err;
    } catch (const std::exception &error) {
        last_error = error.what();
    } catch (...) {
        last_error = "unknown C++ exception";
    }
    return 1;
}

int dnn_load_onnx(const uint8_t *bytes, size_t count, dnn_network *out) {
    return guarded([&] {
        std::vector<uchar> buffer(bytes, bytes + count);
        cv::dnn::Net net = cv::dnn::readNetFromONNX(buffer);
        if (net.empty()) {
            last_error = "the ONNX model has no layers";
            return 1;
        }
        net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
        net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
        *out = new dnn_network_s{net};
        return 0;
    });
}

void dnn_free(dnn_network network) { delete network; }

int dnn_forward(dnn_network network, const float *input, const int *shape, int dims,
                float **output, int *out_shape, int *out_dims) {
    return guarded([&] {
        cv::Mat blob(dims, shape, CV_32F, const_cast<float *>(input));
        network->net.setInput(blob);
        cv::Mat result = network->net.forward();
        if (result.type() != CV_32F) result.convertTo(result, CV_32F);
        if (!result.isContinuous()) result = result.clone();
        if (result.dims > *out_dims) {
            last_error = "the output has more dimensions than expected";
            return 1;
        }
        *out_dims = result.dims;
        for (int i = 0; i < result.dims; i++) out_shape[i] = result.size[i];
        size_t count = result.total();
        *output = static_cast<float *>(std::malloc(count * sizeof(float) + 1));
        if (*output == nullptr) {
            last_error = "out of memory";
            return 1;
        }
        std::memcpy(*output, result.ptr<float>(), count * sizeof(float));
        return 0;
    });
}

void dnn_free_floats(float *values) { std::free(values); }

int dnn_image_input(const uint8_t *rgb, int width, int height, int crop_x, int crop_y, int crop_width, int crop_height,
                    int width_out, int height_out, int canvas_width, int canvas_height, int bgr, float mean, float std,
                    float *output) {
    return guarded([&] {
        if (crop_x < 0 || crop_y < 0 || crop_width <= 0 || crop_height <= 0 || crop_x + crop_width > width ||
            crop_y + crop_height > height || width_out <= 0 || height_out <= 0 || width_out > canvas_width ||
            height_out > canvas_height) {
            last_error = "the crop or the output size does not fit";
            return 1;
        }
        cv::Mat image(height, width, CV_8UC3, const_cast<uint8_t *>(rgb));
        cv::Mat crop = image(cv::Rect(crop_x, crop_y, crop_width, crop_height)), resized;
        bool shrinking = width_out < crop_width && height_out < crop_height;
        cv::resize(crop, resized, cv::Size(width_out, height_out), 0, 0, shrinking ? cv::INTER_AREA : cv::INTER_LINEAR);
        size_t plane = (size_t)canvas_width * canvas_height;
        std::memset(output, 0, 3 * plane * sizeof(float));
        float scale = 1.0f / (255.0f * std), shift = -mean / std;
        for (int y = 0; y < height_out; y++) {
            const uint8_t *row = resized.ptr<uint8_t>(y);
            for (int x = 0; x < width_out; x++) {
                for (int c = 0; c < 3; c++) {
                    int channel = bgr ? 2 - c : c;
                    output[channel * plane + (size_t)y * canvas_width + x] = row[x * 3 + c] * scale + shift;
                }
            }
        }
        return 0;
    });
}
