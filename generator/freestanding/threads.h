/* llama-bindgen freestanding <threads.h>: the thread types, opaque here; no functions. */
#ifndef LLAMA_BINDGEN_THREADS_H
#define LLAMA_BINDGEN_THREADS_H
typedef struct __llama_bindgen_thrd * thrd_t;
typedef struct __llama_bindgen_mtx mtx_t;
typedef struct __llama_bindgen_cnd cnd_t;
typedef unsigned int tss_t;
#define thread_local _Thread_local
#endif
