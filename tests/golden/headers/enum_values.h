/* Enum values outside 0..INT32_MAX: negative, unsigned 32-bit and 64-bit. */
#pragma once

/// Signed values, one of them INT32_MIN.
enum golden_signed {
    GOLDEN_SIGNED_MIN = -2147483647 - 1, ///< INT32_MIN
    GOLDEN_SIGNED_NEG = -2,              ///< a small negative value
    GOLDEN_SIGNED_NEXT,                  ///< no initialiser: -2 + 1
    GOLDEN_SIGNED_MAX = 2147483647,      ///< INT32_MAX
};

/// Only non-negative values, the largest 0xFFFFFFFF: the enum is unsigned int.
enum golden_unsigned {
    GOLDEN_UNSIGNED_ZERO = 0,          ///< zero
    GOLDEN_UNSIGNED_HIGH = 0x80000000, ///< INT32_MAX + 1
    GOLDEN_UNSIGNED_MAX = 0xFFFFFFFF,  ///< UINT32_MAX
};

/// A value past 32 bits and a negative one: the enum needs a 64-bit signed type.
enum golden_wide {
    GOLDEN_WIDE_NEG = -1,                      ///< minus one
    GOLDEN_WIDE_BIG = 0x100000000,             ///< 2**32
    GOLDEN_WIDE_MIN = -0x7FFFFFFFFFFFFFFF - 1, ///< INT64_MIN
};

/// Takes the unsigned enum by value and returns the wide one.
enum golden_wide golden_enum_widen(enum golden_unsigned value);
