/* The C smoke driver's RPC part: what mtp_smoke.c calls (see mtp_smoke_rpc.c). */
#ifndef MTP_SMOKE_RPC_H
#define MTP_SMOKE_RPC_H

#include <stddef.h>

#include "llama.h"

/* --rpc-serve ENDPOINT N_THREADS: a worker; returns only when it cannot serve. */
int smoke_rpc_serve_main(int argc, char ** argv);

/* --rpc-devices ENDPOINTS: one JSON line with the servers' devices. */
int smoke_rpc_devices_main(int argc, char ** argv);

/* Takes a leading "--rpc ENDPOINTS N_GPU_LAYERS [--kill-after-first PID]" out of argc/argv and
 * adds the servers (llama.cpp ends the process where one cannot be added); 0 on a bad split. */
int smoke_rpc_split_arguments(int * argc, char *** argv, size_t max_devices);

/* 1 when a split was asked for. */
int smoke_rpc_active(void);

/* The split (devices, layers, tensor_split) in the target model's parameters. */
void smoke_rpc_model_params(struct llama_model_params * params);

/* After each token: the worker to kill, once. */
void smoke_rpc_after_token(void);

#endif
