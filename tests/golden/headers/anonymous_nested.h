/* Anonymous members, a nested record definition and a field of an unnamed struct type. */
#pragma once
#include <stdint.h>

/// A tagged value: the anonymous union's members are reached directly.
struct golden_variant {
    int32_t tag; ///< which member of the union is live
    union {
        int64_t i; ///< tag 0
        double d;  ///< tag 1
        struct {
            int32_t lo; ///< tag 2, low half
            int32_t hi; ///< tag 2, high half
        };
    };
};

/// Holds a nested struct definition (file-scope in C) and an unnamed struct-typed field.
struct golden_outer {
    /// Defined inside golden_outer, usable on its own.
    struct golden_inner {
        float x; ///< first coordinate
        float y; ///< second coordinate
    } inner;
    struct {
        uint8_t r, g, b; ///< channels
    } color; ///< a field whose struct type has no name
};

/// Reads both records through pointers.
int32_t golden_outer_tag(const struct golden_outer * outer, const struct golden_variant * v);
