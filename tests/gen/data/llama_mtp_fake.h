/* A stand-in for native_wrapper/llama_mtp.h, shaped like the real one: it includes llama.h and
 * declares an opaque handle, an enum, a versioned params struct and llama_mtp_* functions. */
#ifndef LLAMA_MTP_FAKE_H
#define LLAMA_MTP_FAKE_H

#include "llama.h"

#define LLAMA_MTP_API_VERSION 3

struct llama_mtp;

enum llama_mtp_status {
    LLAMA_MTP_STATUS_OK = 0,
    LLAMA_MTP_STATUS_ERROR = -1,
    LLAMA_MTP_STATUS_UNSUPPORTED = -2,
};

/* Versioned: callers fill struct_size and version. */
struct llama_mtp_params {
    uint32_t struct_size;
    uint32_t version;
    int32_t n_draft;
    float p_min;
    enum llama_context_type ctx_type;
    struct llama_context_params draft_ctx;
};

struct llama_mtp_params llama_mtp_default_params(void);
struct llama_mtp * llama_mtp_init(struct llama_model * model, const struct llama_mtp_params * params);
enum llama_mtp_status llama_mtp_draft(struct llama_mtp * mtp, const llama_token * tokens, int32_t n_tokens, llama_token * out, int32_t n_out);
void llama_mtp_free(struct llama_mtp * mtp);

#endif
