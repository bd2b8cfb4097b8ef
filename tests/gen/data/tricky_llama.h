/* A small stand-in for llama.h with the shapes that need care: bit-fields, anonymous and nested
 * members, tagless typedefs, enums declared inside structs, callbacks, unions by value,
 * variadic and va_list functions, static inline functions and macro constants. */
#pragma once
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRICKY_A 3
#define TRICKY_B (TRICKY_A << 4)
#define TRICKY_NEG (-TRICKY_B)
#define TRICKY_STR "s"

typedef struct { uint16_t bits; } tricky_half;

struct tricky_bits {
    uint32_t a : 3;
    uint32_t b : 5;
    uint32_t c : 24;
    uint8_t tail;
    bool flag : 1;
};

struct tricky_nested {
    int32_t tag;
    union {
        int64_t i;
        double d;
        struct { int32_t x, y; };
    };
    struct { float u, v; } uv;
    tricky_half h[2];
    void (*cb)(void * user, int32_t code);
    int64_t (*pick)(const char * key, size_t len);
};

union tricky_value { int32_t i; float f; };
struct tricky_holds_union { int32_t kind; union tricky_value v; };
struct tricky_plain { int32_t a; double b; const char * name; };

struct tricky_list {
    struct tricky_list * next;
    enum tricky_kind { TRICKY_K0, TRICKY_K1 = 5, TRICKY_K2 } kind;
};

typedef void (*tricky_log)(const char * fmt, va_list args);
typedef int32_t (*tricky_cb)(struct tricky_nested * n, void * user);

int32_t tricky_sum(struct tricky_nested n, tricky_cb cb);
union tricky_value tricky_union_result(int32_t i);
int32_t tricky_union_param(union tricky_value v);
int32_t tricky_holds(struct tricky_holds_union h);
int32_t tricky_printf(const char * fmt, ...);
void tricky_vlog(tricky_log log, void * user);
static inline int tricky_inline(void) { return 1; }
struct tricky_bits tricky_bits_result(void);
struct tricky_plain tricky_plain_result(struct tricky_plain in, enum tricky_kind k);

/* va_list has no cffi type: these records lose their layout, and so does whatever holds them */
struct tricky_with_va { int32_t n; va_list args; };
struct tricky_outer { struct tricky_with_va inner[2]; int32_t after; };
struct tricky_by_pointer { struct tricky_with_va * p; };
typedef struct { va_list args; } tricky_tagless_va;
typedef tricky_tagless_va * tricky_tagless_va_ptr;
int32_t tricky_outer_value(struct tricky_outer o);
int32_t tricky_outer_pointer(struct tricky_outer * o);
