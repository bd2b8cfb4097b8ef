/* Macros: integer constants (plain, computed, negative, 64-bit) and ones that are not. */
#pragma once

/// A plain integer constant.
#define GOLDEN_ANSWER 42
/// Computed from another macro.
#define GOLDEN_SHIFTED (GOLDEN_ANSWER << 4)
/// Negative.
#define GOLDEN_NEGATIVE (-GOLDEN_SHIFTED)
/// Past 32 bits.
#define GOLDEN_BIG 0x123456789LL
/// Unsigned 64-bit maximum.
#define GOLDEN_U64_MAX 0xFFFFFFFFFFFFFFFFULL
/// A character constant is an integer too.
#define GOLDEN_CHAR 'A'
/// A string: not an integer constant.
#define GOLDEN_NAME "golden"
/// A floating-point value: not an integer constant.
#define GOLDEN_RATIO 1.5
/// Function-like: never a constant.
#define GOLDEN_MAX(a, b) ((a) > (b) ? (a) : (b))
/// An include-guard-like switch with no body: not recorded.
#define GOLDEN_FEATURE

/// A function so the header declares something besides macros.
int golden_answer(void);
