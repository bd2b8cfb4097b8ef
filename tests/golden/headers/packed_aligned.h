/* Packed and over-aligned structs. */
#pragma once
#include <stdint.h>

/// Packed: no padding, size 7, alignment 1.
struct golden_packed {
    uint8_t a;  ///< offset 0
    int32_t b;  ///< offset 1
    int16_t c;  ///< offset 5
} __attribute__((packed));

/// Over-aligned: alignment 16, size rounded up to 16.
struct golden_aligned {
    int32_t a; ///< offset 0
    float b;   ///< offset 4
} __attribute__((aligned(16)));

/// One over-aligned field: the field sits at offset 16.
struct golden_aligned_field {
    uint8_t tag;                             ///< offset 0
    int32_t value __attribute__((aligned(16))); ///< offset 16
};

/// Takes them by pointer.
void golden_layouts(struct golden_packed * p, struct golden_aligned * a,
                    struct golden_aligned_field * f);
