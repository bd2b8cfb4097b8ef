/* A header two of the golden targets cannot parse: a 62-bit bit-field of a 64-bit type is fine
   on x86_64 and fails on i686 and on 64-bit Windows (long is 32 bits on both). The host's
   declarations and the host's layouts are bound; those two targets have none, and the report
   says why. */
#include <stdint.h>

struct wide_bits {
    unsigned long flags : 62;
    int32_t after;
};

int32_t wide_bits_after(const struct wide_bits * w);
