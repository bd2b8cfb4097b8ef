/* llama-bindgen freestanding <assert.h>: assert() and static_assert as C11 has them. */
#ifndef LLAMA_BINDGEN_ASSERT_H
#define LLAMA_BINDGEN_ASSERT_H
#define assert(expression) ((void)0)
#define static_assert _Static_assert
#endif
