/* llama-bindgen freestanding <stdatomic.h>: a few atomic type names (their declarations are listed as not bound: cffi has no atomics). */
#ifndef LLAMA_BINDGEN_STDATOMIC_H
#define LLAMA_BINDGEN_STDATOMIC_H
typedef _Atomic(_Bool) atomic_bool;
typedef _Atomic(int) atomic_int;
typedef _Atomic(unsigned int) atomic_uint;
typedef _Atomic(long long) atomic_llong;
typedef _Atomic(__SIZE_TYPE__) atomic_size_t;
#endif
