// The C API of torch_shim.h over libtorch. Every entry point catches every C++ exception (GUARD) and turns it
// into a nonzero return plus a thread-local message; handles own heap copies of torch's value types.
#include "torch_shim.h"

#include <torch/torch.h>
#include <torch/script.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

struct torch_tensor_s { at::Tensor tensor; };
struct torch_optimizer_s { std::unique_ptr<torch::optim::Optimizer> optimizer; };
struct torch_script_s { torch::jit::Module module; };

namespace {
thread_local std::string last_error;

torch_tensor wrap(at::Tensor tensor) { return new torch_tensor_s{std::move(tensor)}; }

std::vector<int64_t> dims(const int64_t *values, int count) {
    if (count < 0 || (count > 0 && values == nullptr)) throw std::invalid_argument("negative or missing shape");
    return std::vector<int64_t>(values, values + count);
}

const at::Tensor &get(torch_tensor handle) {
    if (handle == nullptr) throw std::invalid_argument("null tensor handle");
    return handle->tensor;
}

c10::optional<at::Tensor> optional(torch_tensor handle) {
    if (handle == nullptr) return c10::nullopt;
    return handle->tensor;
}

torch::jit::Module &get(torch_script handle) {
    if (handle == nullptr) throw std::invalid_argument("null module handle");
    return handle->module;
}

/// Runs a method by name; its output is a tensor or a tuple whose first element is one.
at::Tensor run(torch::jit::Module &module, const char *name, const at::Tensor &input) {
    if (name == nullptr) throw std::invalid_argument("no method name");
    auto method = module.find_method(name);
    if (!method) throw std::invalid_argument(std::string("the module has no method ") + name);
    auto result = (*method)({input});
    if (result.isTensor()) return result.toTensor();
    if (result.isTuple() && !result.toTupleRef().elements().empty() && result.toTupleRef().elements()[0].isTensor())
        return result.toTupleRef().elements()[0].toTensor();
    throw std::invalid_argument(std::string("the module's ") + name + " returned neither a tensor nor a tuple of tensors");
}

/// The module's archive in a malloc'd buffer.
uint8_t *save(const torch::jit::Module &module, size_t *length) {
    std::ostringstream stream;
    module.save(stream);
    const std::string data = stream.str();
    auto *buffer = static_cast<uint8_t *>(std::malloc(data.size()));
    if (buffer == nullptr) throw std::bad_alloc();
    std::memcpy(buffer, data.data(), data.size());
    *length = data.size();
    return buffer;
}

/// "a.b.c" -> {"a", "b", "c"}; an empty part is an error.
std::vector<std::string> split(const std::string &dotted) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
        size_t dot = dotted.find('.', start);
        parts.push_back(dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
        if (parts.back().empty()) throw std::invalid_argument("parameter name \"" + dotted + "\" has an empty part");
        if (dot == std::string::npos) return parts;
        start = dot + 1;
    }
}
}  // namespace

#define GUARD(...)                                                                    \
    try {                                                                             \
        __VA_ARGS__;                                                                  \
        return 0;                                                                     \
    } catch (const c10::Error &error) {                                               \
        last_error = error.what_without_backtrace();                                  \
    } catch (const std::exception &error) {                                           \
        last_error = error.what();                                                    \
    } catch (...) {                                                                   \
        last_error = "unknown C++ exception";                                         \
    }                                                                                 \
    return 1;

extern "C" {

const char *torch_last_error(void) { return last_error.c_str(); }

int torch_set_num_threads(int threads) { GUARD(at::set_num_threads(threads < 1 ? 1 : threads)) }
int torch_get_num_threads(void) { return at::get_num_threads(); }
int torch_manual_seed(uint64_t seed) { GUARD(torch::manual_seed(seed)) }
int torch_set_grad_enabled(int enabled, int *previous) {
    GUARD(if (previous) *previous = at::GradMode::is_enabled(); at::GradMode::set_enabled(enabled != 0))
}

int torch_from_floats(const float *data, const int64_t *shape, int rank, torch_tensor *out) {
    GUARD(auto sizes = dims(shape, rank);
          *out = wrap(torch::from_blob(const_cast<float *>(data), sizes, torch::kFloat32).clone()))
}

int torch_from_int64s(const int64_t *data, const int64_t *shape, int rank, torch_tensor *out) {
    GUARD(auto sizes = dims(shape, rank);
          *out = wrap(torch::from_blob(const_cast<int64_t *>(data), sizes, torch::kInt64).clone()))
}

int torch_filled(int kind, const int64_t *shape, int rank, torch_tensor *out) {
    GUARD(auto sizes = dims(shape, rank); at::Tensor t; switch (kind) {
        case 0: t = torch::zeros(sizes); break;
        case 1: t = torch::ones(sizes); break;
        case 3: t = torch::rand(sizes); break;
        default: throw std::invalid_argument("unknown fill kind " + std::to_string(kind));
    } *out = wrap(t))
}

void torch_tensor_free(torch_tensor tensor) { delete tensor; }

int torch_shape(torch_tensor tensor, int64_t *shape, int capacity, int *rank) {
    GUARD(auto sizes = get(tensor).sizes(); *rank = static_cast<int>(sizes.size());
          for (int i = 0; i < capacity && i < *rank; i++) shape[i] = sizes[i])
}

int torch_copy_floats(torch_tensor tensor, float *out, int64_t count) {
    GUARD(auto t = get(tensor).detach().to(torch::kFloat32).contiguous();
          if (t.numel() != count) throw std::invalid_argument("copy of " + std::to_string(t.numel()) +
                                                              " elements into room for " + std::to_string(count));
          std::memcpy(out, t.data_ptr<float>(), sizeof(float) * count))
}

int torch_copy_int64s(torch_tensor tensor, int64_t *out, int64_t count) {
    GUARD(auto t = get(tensor).detach().to(torch::kInt64).contiguous();
          if (t.numel() != count) throw std::invalid_argument("copy of " + std::to_string(t.numel()) +
                                                              " elements into room for " + std::to_string(count));
          std::memcpy(out, t.data_ptr<int64_t>(), sizeof(int64_t) * count))
}

int torch_set_requires_grad(torch_tensor tensor, int requires) { GUARD(get(tensor).requires_grad_(requires != 0)) }

int torch_copy_into(torch_tensor tensor, torch_tensor source) {
    GUARD(torch::NoGradGuard guard; get(tensor).copy_(get(source)))
}

int torch_backward(torch_tensor loss) { GUARD(get(loss).backward()) }

int torch_unary(int op, torch_tensor a, torch_tensor *out) {
    GUARD(const auto &x = get(a); at::Tensor y; switch (op) {
        case 0: y = torch::relu(x); break;
        case 1: y = torch::sigmoid(x); break;
        case 2: y = torch::exp(x); break;
        case 3: y = torch::log(x); break;
        case 4: y = torch::neg(x); break;
        case 5: y = torch::sqrt(x); break;
        case 6: y = torch::square(x); break;
        case 8: y = torch::abs(x); break;
        case 9: y = x.detach(); break;
        case 10: y = x.clone().contiguous(); break;
        default: throw std::invalid_argument("unknown unary op " + std::to_string(op));
    } *out = wrap(y))
}

int torch_binary(int op, torch_tensor a, torch_tensor b, torch_tensor *out) {
    GUARD(const auto &x = get(a); const auto &z = get(b); at::Tensor y; switch (op) {
        case 0: y = x + z; break;
        case 1: y = x - z; break;
        case 2: y = x * z; break;
        case 3: y = x / z; break;
        case 4: y = torch::matmul(x, z); break;
        case 5: y = torch::maximum(x, z); break;
        case 6: y = torch::minimum(x, z); break;
        default: throw std::invalid_argument("unknown binary op " + std::to_string(op));
    } *out = wrap(y))
}

int torch_scalar(int op, torch_tensor a, double value, torch_tensor *out) {
    GUARD(const auto &x = get(a); at::Tensor y; switch (op) {
        case 0: y = x + value; break;
        case 1: y = x * value; break;
        case 2: y = torch::pow(x, value); break;
        case 4: y = torch::clamp_min(x, value); break;
        case 5: y = torch::clamp_max(x, value); break;
        default: throw std::invalid_argument("unknown scalar op " + std::to_string(op));
    } *out = wrap(y))
}

int torch_reduce(int op, torch_tensor a, int64_t dim, int keepdim, torch_tensor *out) {
    GUARD(const auto &x = get(a); bool all = dim < -x.dim(); bool keep = keepdim != 0; at::Tensor y; switch (op) {
        case 0: y = all ? x.sum() : x.sum(dim, keep); break;
        case 1: y = all ? x.mean() : x.mean(dim, keep); break;
        case 2: y = all ? x.max() : std::get<0>(x.max(dim, keep)); break;
        case 3: y = all ? x.argmax() : x.argmax(dim, keep); break;
        case 4: y = torch::softmax(x, dim); break;
        case 5: y = torch::log_softmax(x, dim); break;
        default: throw std::invalid_argument("unknown reduction " + std::to_string(op));
    } *out = wrap(y))
}

int torch_reshape(torch_tensor a, const int64_t *shape, int rank, torch_tensor *out) {
    GUARD(*out = wrap(get(a).reshape(dims(shape, rank))))
}

int torch_permute(torch_tensor a, const int64_t *order, int rank, torch_tensor *out) {
    GUARD(*out = wrap(get(a).permute(dims(order, rank)).contiguous()))
}

int torch_narrow(torch_tensor a, int64_t dim, int64_t start, int64_t length, torch_tensor *out) {
    GUARD(*out = wrap(get(a).narrow(dim, start, length)))
}

int torch_cat(const torch_tensor *tensors, int count, int64_t dim, torch_tensor *out) {
    GUARD(std::vector<at::Tensor> parts; for (int i = 0; i < count; i++) parts.push_back(get(tensors[i]));
          *out = wrap(torch::cat(parts, dim)))
}

int torch_flip(torch_tensor a, const int64_t *order, int count, torch_tensor *out) {
    GUARD(*out = wrap(torch::flip(get(a), dims(order, count))))
}

int torch_conv2d(torch_tensor input, torch_tensor weight, torch_tensor bias, int64_t stride, int64_t padding,
                 torch_tensor *out) {
    GUARD(*out = wrap(torch::conv2d(get(input), get(weight), optional(bias), stride, padding)))
}

int torch_linear(torch_tensor input, torch_tensor weight, torch_tensor bias, torch_tensor *out) {
    GUARD(*out = wrap(torch::linear(get(input), get(weight), optional(bias))))
}

int torch_batch_norm(torch_tensor input, torch_tensor weight, torch_tensor bias, torch_tensor running_mean,
                     torch_tensor running_var, int training, double momentum, double eps, torch_tensor *out) {
    GUARD(*out = wrap(torch::batch_norm(get(input), optional(weight), optional(bias), optional(running_mean),
                                        optional(running_var), training != 0, momentum, eps, false)))
}

int torch_adaptive_avg_pool2d(torch_tensor input, int64_t height, int64_t width, torch_tensor *out) {
    GUARD(*out = wrap(torch::adaptive_avg_pool2d(get(input), {height, width})))
}

int torch_resize_bilinear(torch_tensor input, int64_t height, int64_t width, int antialias, torch_tensor *out) {
    GUARD(std::vector<int64_t> size{height, width};
          *out = wrap(antialias ? at::_upsample_bilinear2d_aa(get(input), size, false)
                                : at::upsample_bilinear2d(get(input), size, false)))
}

int torch_cross_entropy(torch_tensor logits, torch_tensor targets, double label_smoothing, torch_tensor *out) {
    GUARD(*out = wrap(at::cross_entropy_loss(get(logits), get(targets), {}, at::Reduction::Mean, -100,
                                             label_smoothing)))
}

int torch_bce_with_logits(torch_tensor logits, torch_tensor targets, torch_tensor weight, int reduction,
                          torch_tensor *out) {
    GUARD(*out = wrap(at::binary_cross_entropy_with_logits(get(logits), get(targets), optional(weight), {},
                                                           reduction == 1 ? at::Reduction::Sum : at::Reduction::Mean)))
}

int torch_optimizer_new(int kind, const torch_tensor *parameters, int count, double learning_rate,
                        double momentum, double weight_decay, torch_optimizer *out) {
    GUARD(std::vector<at::Tensor> params; for (int i = 0; i < count; i++) params.push_back(get(parameters[i]));
          std::unique_ptr<torch::optim::Optimizer> optimizer; switch (kind) {
              case 0: optimizer = std::make_unique<torch::optim::SGD>(
                          params, torch::optim::SGDOptions(learning_rate).momentum(momentum)
                                      .nesterov(momentum > 0).weight_decay(weight_decay));
                      break;
              case 1: optimizer = std::make_unique<torch::optim::Adam>(
                          params, torch::optim::AdamOptions(learning_rate).weight_decay(weight_decay));
                      break;
              case 2: optimizer = std::make_unique<torch::optim::AdamW>(
                          params, torch::optim::AdamWOptions(learning_rate).weight_decay(weight_decay));
                      break;
              default: throw std::invalid_argument("unknown optimizer kind " + std::to_string(kind));
          } *out = new torch_optimizer_s{std::move(optimizer)})
}

int torch_optimizer_set_learning_rate(torch_optimizer optimizer, double learning_rate) {
    GUARD(for (auto &group : optimizer->optimizer->param_groups()) group.options().set_lr(learning_rate))
}

int torch_optimizer_zero_grad(torch_optimizer optimizer) { GUARD(optimizer->optimizer->zero_grad()) }
int torch_optimizer_step(torch_optimizer optimizer) { GUARD(optimizer->optimizer->step()) }
void torch_optimizer_free(torch_optimizer optimizer) { delete optimizer; }

int torch_script_load(const uint8_t *bytes, size_t length, torch_script *out) {
    GUARD(std::istringstream stream(std::string(reinterpret_cast<const char *>(bytes), length));
          auto module = torch::jit::load(stream, torch::kCPU); module.eval();
          *out = new torch_script_s{std::move(module)})
}

int torch_script_frozen(torch_script module, const char *method, torch_script *out) {
    GUARD(std::vector<std::string> kept;
          if (method != nullptr && std::strcmp(method, "forward") != 0) kept.emplace_back(method);
          auto frozen = torch::jit::freeze(get(module), kept);
          *out = new torch_script_s{torch::jit::optimize_for_inference(frozen, kept)})
}

int torch_script_run(torch_script module, const char *name, torch_tensor input, torch_tensor *out) {
    GUARD(torch::NoGradGuard guard; *out = wrap(run(get(module), name, get(input))))
}

int torch_script_has_method(torch_script module, const char *name, int *out) {
    GUARD(*out = name != nullptr && module->module.find_method(name).has_value() ? 1 : 0)
}

int torch_script_named_tensors(torch_script module, char ***names, torch_tensor **tensors, int *count) {
    GUARD(*names = nullptr; *tensors = nullptr; *count = 0;
          std::vector<std::pair<std::string, at::Tensor>> found;
          for (const auto &item : module->module.named_parameters(true)) found.emplace_back(item.name, item.value.detach());
          for (const auto &item : module->module.named_buffers(true)) found.emplace_back(item.name, item.value.detach());
          if (found.empty()) return 0;
          auto *name_array = static_cast<char **>(std::calloc(found.size(), sizeof(char *)));
          auto *tensor_array = static_cast<torch_tensor *>(std::calloc(found.size(), sizeof(torch_tensor)));
          if (name_array == nullptr || tensor_array == nullptr) { std::free(name_array); std::free(tensor_array); throw std::bad_alloc(); }
          for (size_t i = 0; i < found.size(); i++) {
              name_array[i] = strdup(found[i].first.c_str());
              tensor_array[i] = wrap(found[i].second.contiguous());
          }
          *names = name_array; *tensors = tensor_array; *count = static_cast<int>(found.size()))
}

void torch_script_free(torch_script module) { delete module; }

int torch_script_compile(const char *source, uint8_t **bytes, size_t *length) {
    return torch_script_compile_with_parameters(source, nullptr, nullptr, 0, bytes, length);
}

int torch_script_compile_with_parameters(const char *source, const char *const *names, const torch_tensor *values,
                                         int count, uint8_t **bytes, size_t *length) {
    GUARD(*bytes = nullptr; *length = 0; if (source == nullptr) throw std::invalid_argument("no source");
          if (count < 0 || (count > 0 && (names == nullptr || values == nullptr)))
              throw std::invalid_argument("negative or missing parameters");
          torch::jit::Module module("Compiled");
          for (int i = 0; i < count; i++) {
              if (names[i] == nullptr) throw std::invalid_argument("a parameter without a name");
              auto path = split(names[i]);
              // Submodules are handles on shared objects: registering one and then filling it fills the module.
              torch::jit::Module owner = module;
              for (size_t step = 0; step + 1 < path.size(); step++) {
                  if (!owner.hasattr(path[step])) {
                      torch::jit::Module child("Compiled_" + std::to_string(i) + "_" + std::to_string(step));
                      owner.register_module(path[step], child);
                  }
                  owner = owner.attr(path[step]).toModule();
              }
              owner.register_parameter(path.back(), get(values[i]).detach().clone(), false);
          }
          module.define(source);
          *bytes = save(module, length))
}

int torch_script_parameter_names(torch_script module, char **names, size_t *length) {
    GUARD(*names = nullptr; *length = 0; std::string text;
          for (const auto &parameter : get(module).named_parameters(true)) text += parameter.name + "\n";
          auto *buffer = static_cast<char *>(std::malloc(text.size() + 1));
          if (buffer == nullptr) throw std::bad_alloc();
          std::memcpy(buffer, text.data(), text.size()); buffer[text.size()] = 0;
          *names = buffer; *length = text.size())
}

int torch_script_parameter(torch_script module, const char *name, torch_tensor *out) {
    GUARD(if (name == nullptr) throw std::invalid_argument("no parameter name");
          for (const auto &parameter : get(module).named_parameters(true)) {
              if (parameter.name == name) { *out = wrap(parameter.value); return 0; }
          }
          throw std::invalid_argument(std::string("the module has no parameter ") + name))
}

int torch_script_run_recording(torch_script module, const char *name, torch_tensor input, torch_tensor *out) {
    GUARD(torch::AutoGradMode recording(true); *out = wrap(run(get(module), name, get(input))))
}

int torch_script_save(torch_script module, uint8_t **bytes, size_t *length) {
    GUARD(*bytes = nullptr; *length = 0; *bytes = save(get(module), length))
}

int torch_has_gradient(torch_tensor tensor, int *out) { GUARD(*out = get(tensor).grad().defined() ? 1 : 0) }

}  // extern "C"
