/* llama-bindgen freestanding <signal.h>: sig_atomic_t; no functions. */
#ifndef LLAMA_BINDGEN_SIGNAL_H
#define LLAMA_BINDGEN_SIGNAL_H
typedef int sig_atomic_t;
#endif
