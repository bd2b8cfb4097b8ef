/* Fields whose type has no name: an unnamed enum, arrays of and pointers to unnamed structs,
   and a named struct defined inside an unnamed member. */
#include <stdint.h>

struct unnamed_fields {
    enum { MODE_A, MODE_B = 5 } mode;   ///< an int-sized enum with no name
    struct { int32_t x, y; } points[2]; ///< an array of an unnamed struct
    struct { float w; } * weight;       ///< a pointer to an unnamed struct
    union {
        struct named_inside { int16_t a, b; } pair; ///< named, inside an unnamed union
        int64_t raw;
    };
};

int32_t unnamed_fields_mode(const struct unnamed_fields * f);
int32_t named_inside_sum(struct named_inside p);
