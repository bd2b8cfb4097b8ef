/* Function pointers: typedef'd, as struct fields, as parameters and as a result. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// A typedef'd callback.
typedef bool (*golden_progress_cb)(float progress, void * user_data);

/// A typedef of a function type (not a pointer).
typedef int32_t golden_compare_fn(const void * a, const void * b);

/// Callbacks held as fields.
struct golden_hooks {
    golden_progress_cb on_progress;           ///< through the typedef
    void (*on_log)(int32_t level, const char * text); ///< spelled out
    golden_compare_fn * compare;             ///< pointer to the function typedef
    void * user_data;                        ///< passed back to every hook
};

/// A spelled-out function pointer parameter and a typedef'd one.
void golden_sort(void * base, size_t n, int32_t (*cmp)(const void *, const void *),
                 golden_progress_cb progress);

/// Returns a function pointer.
golden_progress_cb golden_default_progress(void);

/// Installs the hooks.
void golden_set_hooks(const struct golden_hooks * hooks);
