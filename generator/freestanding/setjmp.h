/* llama-bindgen freestanding <setjmp.h>: jmp_buf as an array of the right alignment (its size is the C library's; not bound by value). */
#ifndef LLAMA_BINDGEN_SETJMP_H
#define LLAMA_BINDGEN_SETJMP_H
typedef long long jmp_buf[32];
#endif
