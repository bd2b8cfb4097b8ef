/* Enums whose integer type is not int: a fixed underlying type (C23 and a clang extension),
   a packed enum, unsigned values above the signed range of their type, values beyond int.
   Their uses are bound with that integer type (cffi would make them int-sized). */
#include <stdint.h>

enum small_e : uint8_t { SMALL_A = 1, SMALL_B = 200 };
enum __attribute__((packed)) packed_e { PACKED_A, PACKED_B };
typedef enum : uint16_t { U16_LOW = 1, U16_HIGH = 32809 } u16_e;
enum wide_e { WIDE_SMALL = 1, WIDE_BIG = 0x100000000 };
enum plain_e { PLAIN_A, PLAIN_B };

struct enum_holder {
    enum small_e s;
    enum packed_e p;
    u16_e u;
    enum plain_e plain;
    int32_t after;
};

enum small_e small_next(enum small_e s);
u16_e u16_of(int32_t x);
enum wide_e wide_of(int64_t x);
int32_t holder_sum(const struct enum_holder * h);
