// A plain C API over libtorch (Debian libtorch-dev 1.13), in the manner of the `tch` crate's torch-sys shim.
//
// Why C: Swift imports this header without C++ interop, so nothing of torch's C++ types, templates or
// exceptions is visible above it, and the one .cpp behind it (slow to compile: keep it small and stable)
// changes rarely. Networks are written on the Swift side from the tensor operations below, the way tch
// writes its `nn` in Rust over tensor ops.
//
// Conventions:
// - Handles are opaque pointers owned by the caller; free each with its *_free function exactly once.
// - Every function that can fail returns 0 on success and nonzero on failure; a C++ exception never
//   crosses this boundary. On failure `torch_last_error()` returns the message (c10's message without
//   its backtrace) for the calling thread, valid until the next failing call on that thread.
// - Output handles are written only on success.
#ifndef MENAGERIE_TORCH_SHIM_H
#define MENAGERIE_TORCH_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct torch_tensor_s *torch_tensor;
typedef struct torch_optimizer_s *torch_optimizer;
typedef struct torch_script_s *torch_script;

/// The calling thread's last error message ("" when none).
const char *torch_last_error(void);

// MARK: Runtime settings
int torch_set_num_threads(int threads);
int torch_get_num_threads(void);
/// Seeds torch's default CPU generator (parameter initialisation, rand).
int torch_manual_seed(uint64_t seed);
/// Enables or disables gradient recording for the calling thread; writes the previous setting.
int torch_set_grad_enabled(int enabled, int *previous);

// MARK: Creation, inspection, data transfer
int torch_from_floats(const float *data, const int64_t *shape, int rank, torch_tensor *out);
int torch_from_int64s(const int64_t *data, const int64_t *shape, int rank, torch_tensor *out);
/// kind: 0 zeros, 1 ones, 3 uniform [0, 1) (2, once standard normal, is unused).
int torch_filled(int kind, const int64_t *shape, int rank, torch_tensor *out);
void torch_tensor_free(torch_tensor tensor);
/// Writes up to `capacity` sizes into `shape` and the rank into `rank`.
int torch_shape(torch_tensor tensor, int64_t *shape, int capacity, int *rank);
/// Copies the tensor (converted to float32, contiguous) into `out`, which holds `count` elements exactly.
int torch_copy_floats(torch_tensor tensor, float *out, int64_t count);
int torch_copy_int64s(torch_tensor tensor, int64_t *out, int64_t count);
int torch_set_requires_grad(torch_tensor tensor, int requires);
/// Copies `source`'s values into `tensor` in place, without recording gradients (loading weights).
int torch_copy_into(torch_tensor tensor, torch_tensor source);
int torch_backward(torch_tensor loss);

// MARK: Element-wise and shape operations
/// op: 0 relu, 1 sigmoid, 2 exp, 3 log, 4 neg, 5 sqrt, 6 square, 8 abs (7, once tanh, is unused), 9 detach, 10 clone (contiguous).
int torch_unary(int op, torch_tensor a, torch_tensor *out);
/// op: 0 add, 1 sub, 2 mul, 3 div, 4 matmul, 5 maximum, 6 minimum. Broadcasting as torch does it.
int torch_binary(int op, torch_tensor a, torch_tensor b, torch_tensor *out);
/// op: 0 add, 1 mul, 2 pow, 4 clamp_min, 5 clamp_max (3 and 6 are unused).
int torch_scalar(int op, torch_tensor a, double value, torch_tensor *out);
/// op: 0 sum, 1 mean, 2 max (values), 3 argmax, 4 softmax, 5 log_softmax; dim < -rank means
/// "over all elements" for sum/mean/max/argmax. keepdim applies to reductions.
int torch_reduce(int op, torch_tensor a, int64_t dim, int keepdim, torch_tensor *out);
int torch_reshape(torch_tensor a, const int64_t *shape, int rank, torch_tensor *out);
int torch_permute(torch_tensor a, const int64_t *dims, int rank, torch_tensor *out);
int torch_narrow(torch_tensor a, int64_t dim, int64_t start, int64_t length, torch_tensor *out);
int torch_cat(const torch_tensor *tensors, int count, int64_t dim, torch_tensor *out);
int torch_flip(torch_tensor a, const int64_t *dims, int count, torch_tensor *out);

// MARK: Network layers (NCHW)
/// bias may be NULL.
int torch_conv2d(torch_tensor input, torch_tensor weight, torch_tensor bias, int64_t stride, int64_t padding,
                 torch_tensor *out);
/// bias may be NULL. y = x·wᵀ + b.
int torch_linear(torch_tensor input, torch_tensor weight, torch_tensor bias, torch_tensor *out);
/// Updates running_mean/running_var in place when training.
int torch_batch_norm(torch_tensor input, torch_tensor weight, torch_tensor bias, torch_tensor running_mean,
                     torch_tensor running_var, int training, double momentum, double eps, torch_tensor *out);
int torch_adaptive_avg_pool2d(torch_tensor input, int64_t height, int64_t width, torch_tensor *out);
/// Bilinear resize of an NCHW float tensor; antialias averages when shrinking (as PIL does).
int torch_resize_bilinear(torch_tensor input, int64_t height, int64_t width, int antialias, torch_tensor *out);

// MARK: Losses (mean over the batch)
/// logits [N, C], targets int64 [N]; label_smoothing in [0, 1).
int torch_cross_entropy(torch_tensor logits, torch_tensor targets, double label_smoothing, torch_tensor *out);
/// weight may be NULL; reduction 0 mean, 1 sum.
int torch_bce_with_logits(torch_tensor logits, torch_tensor targets, torch_tensor weight, int reduction,
                          torch_tensor *out);

// MARK: Optimisers over a list of parameter tensors (the list is copied; tensors stay the caller's)
/// kind: 0 SGD (momentum, nesterov when momentum > 0), 1 Adam, 2 AdamW.
int torch_optimizer_new(int kind, const torch_tensor *parameters, int count, double learning_rate,
                        double momentum, double weight_decay, torch_optimizer *out);
int torch_optimizer_set_learning_rate(torch_optimizer optimizer, double learning_rate);
int torch_optimizer_zero_grad(torch_optimizer optimizer);
int torch_optimizer_step(torch_optimizer optimizer);
void torch_optimizer_free(torch_optimizer optimizer);

// MARK: TorchScript modules trained elsewhere
int torch_script_load(const uint8_t *bytes, size_t length, torch_script *out);
/// A copy of the module for inference only (torch.jit.freeze, then optimize_for_inference: weights made constants,
/// batch norm folded into the convolutions before it), `method` kept callable beside forward. The copy cannot be
/// trained or saved; the module is unchanged.
int torch_script_frozen(torch_script module, const char *method, torch_script *out);
/// Runs the method `name` (e.g. "forward") on input in eval mode without gradients; the output must be a tensor
/// (or a tuple whose first element is one). A method the module lacks is an error naming it.
int torch_script_run(torch_script module, const char *name, torch_tensor input, torch_tensor *out);
/// Sets *out to 1 when the module has a method `name` (e.g. an exported `features`), else 0.
int torch_script_has_method(torch_script module, const char *name, int *out);
/// The module's parameters, then its buffers, recursively by dotted name (`net._bn0.running_mean`), as Python's
/// named_parameters() and named_buffers() list them: *count entries; each names[i] malloc'd and each tensors[i] a
/// new handle, and both arrays malloc'd — all the caller's to free (free, torch_tensor_free, free).
int torch_script_named_tensors(torch_script module, char ***names, torch_tensor **tensors, int *count);
void torch_script_free(torch_script module);
/// Compiles TorchScript source (the methods of one module, e.g. `def forward(self, x): ...`) into a saved module
/// archive in a buffer allocated with malloc (the caller frees it): tests build their modules without Python.
int torch_script_compile(const char *source, uint8_t **bytes, size_t *length);
/// torch_script_compile with parameters registered before the source is compiled: each dotted name makes the
/// submodules it passes through ("blocks.1.weight": a submodule `blocks` holding a submodule `1` holding
/// `weight`), which the source reaches as `getattr(self.blocks, "1").weight`. The values are copied.
int torch_script_compile_with_parameters(const char *source, const char *const *names, const torch_tensor *values,
                                         int count, uint8_t **bytes, size_t *length);

// MARK: Training a TorchScript module (fine-tuning part of a pretrained network)
/// The dotted names of the module's parameters, its submodules' included, in registration order, each ended by a
/// newline, in a buffer allocated with malloc (the caller frees it).
int torch_script_parameter_names(torch_script module, char **names, size_t *length);
/// The parameter of that dotted name, sharing the module's storage and gradient: setting it to require gradients
/// and stepping an optimizer over it trains the module. An unknown name is an error naming it.
int torch_script_parameter(torch_script module, const char *name, torch_tensor *out);
/// torch_script_run with gradient recording on, whatever the thread's setting: backward from its output fills the
/// gradients of the module's parameters that require them. The module's graph is run as it was traced or
/// scripted (a traced batch norm keeps the mode it was traced in).
int torch_script_run_recording(torch_script module, const char *name, torch_tensor input, torch_tensor *out);
/// Saves the module with its current weights as a TorchScript archive (what torch_script_load reads) in a buffer
/// allocated with malloc (the caller frees it).
int torch_script_save(torch_script module, uint8_t **bytes, size_t *length);
/// Sets *out to 1 when backward has given the tensor a gradient, else 0 (a parameter its output does not use).
int torch_has_gradient(torch_tensor tensor, int *out);

#ifdef __cplusplus
}
#endif
#endif
