#include <uv.h>

/// `uv_loop_configure` is variadic, which Swift cannot call: measuring the loop's idle time
/// (`uv_metrics_idle_time`) is the one option we set.
static inline int uv_loop_configure_idle_time(uv_loop_t *loop) {
    return uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
}

#include <sys/prctl.h>

/// Names the calling thread (at most 15 characters are kept), as `top -H`, perf and /proc show it;
/// `prctl` is variadic, which Swift cannot call.
static inline int menagerie_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}
