/* Records the compiler lays out unlike cffi would from the declaration alone: a #pragma pack
   region (clang reports no attribute for it) and an empty struct (size 0 in C, 1 in cffi).
   Each is declared opaque and listed; so is a record that holds one by value; a record outside
   the region is bound with its layout. */
#include <stdint.h>

#pragma pack(push, 2)
struct packed_two {
    uint16_t tag;
    int64_t value;
};

struct packed_bits {
    uint8_t a : 3;
    uint32_t b : 20;
    int64_t c;
};
#pragma pack(pop)

struct empty {};

struct holds_packed {
    int32_t n;
    struct packed_two inner;
};

struct after_region {
    uint16_t tag;
    int64_t value;
};

void use_records(struct packed_two * p, struct packed_bits * b, struct empty * e,
                 struct holds_packed * h, struct after_region * a);
int32_t first_tag(struct after_region a);
