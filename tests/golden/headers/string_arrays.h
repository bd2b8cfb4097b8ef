/* String lists as parameters: const char * const *, char **, const char **. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/// Reads a list of strings it may not change: neither the pointers nor the characters.
int32_t golden_join(const char * const * parts, size_t n_parts, char * out, size_t out_size);

/// Hands back strings it owns.
void golden_names(const char ** names, size_t capacity);

/// Changes strings in place.
void golden_upper(char ** strings, size_t n);

/// A struct holding a const list.
struct golden_argv {
    int32_t argc;              ///< how many
    const char * const * argv; ///< the list
};
