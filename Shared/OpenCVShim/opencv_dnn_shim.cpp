// Keep this file small: it is the only translation unit that sees OpenCV's headers.
#include "opencv_dnn_shim.h"

#include <opencv2/dnn.hpp>

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
