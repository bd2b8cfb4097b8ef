/* Unions: named, typedef'd, held by a struct, passed by pointer and by value. */
#pragma once
#include <stdint.h>

/// The bits of a float or of an integer.
union golden_bits {
    float f;    ///< as a float
    uint32_t u; ///< as an integer
    uint8_t bytes[4]; ///< byte by byte
};

/// A union named only by its typedef.
typedef union {
    int64_t i; ///< integer view
    void * p;  ///< pointer view
} golden_word;

/// A struct holding a union by value.
struct golden_boxed {
    int32_t kind;          ///< which view is live
    union golden_bits bits; ///< the payload
};

/// Fills a union through a pointer: bindable.
void golden_bits_set(union golden_bits * out, float value);

/// Passes a union by value: libffi cannot describe it, so the cdef leaves it out.
uint32_t golden_bits_value(union golden_bits bits);

/// Returns a typedef'd union by value: left out as well.
golden_word golden_word_make(int64_t i);
