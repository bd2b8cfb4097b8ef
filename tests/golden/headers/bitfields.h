/* Bit-fields: packed into one unit, spilling into the next, and a zero-width separator. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

/// Flags in bit-fields of different widths.
struct golden_flags {
    uint32_t mode : 3;     ///< bits 0..2
    uint32_t level : 5;    ///< bits 3..7
    uint32_t count : 24;   ///< bits 8..31
    uint8_t tail;          ///< a whole byte after the bit-fields
    bool on : 1;           ///< a one-bit bool
    uint32_t : 0;          ///< zero width: the next field starts a new unit
    uint32_t after : 4;    ///< in the new unit
    int32_t signed_bits : 7; ///< a signed bit-field
};

/// Takes the struct by pointer: bindable.
uint32_t golden_flags_mode(const struct golden_flags * flags);

/// Returns the struct by value: libffi cannot describe bit-fields, so the cdef leaves it out.
struct golden_flags golden_flags_default(void);
