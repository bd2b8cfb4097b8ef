// Implementation of llama_mtp.h over llama.cpp's common/speculative (draft-mtp only).
//
// Every entry point checks the preconditions that upstream enforces with GGML_ASSERT (which
// aborts the process) and returns a status instead, and catches every C++ exception.

#include "llama_mtp.h"

#include "common.h"
#include "speculative.h"

#include "llama-ext.h"  // llama_get_embeddings_nextn (staging API, used to validate mirrors)

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#ifndef LLAMA_MTP_LLAMA_COMMIT
#    define LLAMA_MTP_LLAMA_COMMIT "unknown"
#endif

// Exported by libllama (src/llama-model.h, "for internal test use"): the model's loaded tensors.
// Tensors skipped at load time (the NextN block when load_mtp = false) are not in it.
const std::vector<std::pair<std::string, ggml_tensor *>> & llama_internal_get_tensor_map(
    const llama_model * model);

namespace {

constexpr int32_t k_max_draft = 255;  // upstream counts accepted tokens in a uint16_t

thread_local std::string g_last_error;

struct seq_state {
    int32_t pending = -1;      // size of the last draft not yet accepted; -1: none
    bool verified = false;     // a batch for this sequence was mirrored after that draft
    llama_tokens prompt;       // what upstream's draft slot points at
    llama_tokens draft;        // upstream writes the draft here
};

llama_mtp_status fail(llama_mtp_status status, const std::string & message) {
    g_last_error = message;
    return status;
}

llama_mtp_status ok() {
    g_last_error.clear();
    return LLAMA_MTP_STATUS_OK;
}

template <typename F>
llama_mtp_status guarded(const char * where, F && body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR, std::string(where) + ": out of memory");
    } catch (const std::exception & e) {
        return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR, std::string(where) + ": " + e.what());
    } catch (...) {
        return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR, std::string(where) + ": unknown exception");
    }
}

void params_defaults(llama_mtp_params & p) {
    std::memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.n_max = 3;
    p.n_min = 0;
    p.p_min = 0.0f;
    p.n_seq = 1;
    p.backend_sampling = 1;
    p.n_threads = 0;
    p.n_threads_batch = 0;
}

// Every architecture with an MTP graph gives its NextN block an eh_proj tensor.
bool has_nextn_tensors(const llama_model * model) {
    for (const auto & entry : llama_internal_get_tensor_map(model)) {
        if (entry.second != nullptr && entry.first.find(".nextn.eh_proj") != std::string::npos) {
            return true;
        }
    }
    return false;
}

// Smallest struct_size this library accepts (every field of ABI version 1).
constexpr uint32_t k_params_min_size = sizeof(llama_mtp_params);
constexpr uint32_t k_stats_min_size = sizeof(llama_mtp_stats);

}  // namespace

struct llama_mtp {
    llama_context * ctx_tgt = nullptr;
    llama_context * ctx_dft = nullptr;
    common_speculative * spec = nullptr;
    llama_mtp_params params{};
    std::vector<seq_state> seqs;
    std::unique_ptr<common_batch> batch_tgt;  // used by llama_mtp_step
    llama_mtp_stats stats{};

    ~llama_mtp() {
        common_speculative_free(spec);
        if (ctx_dft != nullptr) {
            llama_free(ctx_dft);
        }
    }
};

namespace {

llama_mtp_status check_seq(const llama_mtp * mtp, llama_seq_id seq_id) {
    if (seq_id < 0 || (uint32_t) seq_id >= mtp->params.n_seq) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    "seq_id " + std::to_string(seq_id) + " is outside [0, " +
                        std::to_string(mtp->params.n_seq) + ")");
    }
    return LLAMA_MTP_STATUS_OK;
}

void remove_range(llama_mtp * mtp, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    llama_memory_seq_rm(llama_get_memory(mtp->ctx_tgt), seq_id, p0, p1);
    llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), seq_id, p0, p1);
}

llama_mtp_status do_draft(llama_mtp * mtp, llama_seq_id seq_id, llama_token id_last,
                          llama_pos pos0, int32_t n_max) {
    seq_state & st = mtp->seqs[seq_id];
    if (st.pending > 0) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    "llama_mtp_draft: the previous draft of seq " + std::to_string(seq_id) +
                        " was not accepted yet (call llama_mtp_accept, 0 if none matched)");
    }
    if (pos0 < 0) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_draft: pos0 must be >= 0");
    }
    st.draft.clear();
    auto & dp = common_speculative_get_draft_params(mtp->spec, seq_id);
    dp.drafting = true;
    dp.n_max = std::min(n_max, mtp->params.n_max);
    dp.pos0 = pos0;
    dp.id_last = id_last;
    dp.prompt = &st.prompt;
    dp.result = &st.draft;
    common_speculative_draft(mtp->spec);
    dp.drafting = false;

    // The draft context now holds KV for [pos0, ...) written while drafting; the verification
    // batch will be mirrored there, so drop it.
    llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), seq_id, pos0, -1);

    st.pending = (int32_t) st.draft.size();
    st.verified = false;
    if (st.pending > 0) {
        mtp->stats.n_drafts += 1;
        mtp->stats.n_drafted += (uint64_t) st.pending;
    }
    return LLAMA_MTP_STATUS_OK;
}

llama_mtp_status do_accept(llama_mtp * mtp, llama_seq_id seq_id, int32_t n_accepted,
                           const char * where) {
    seq_state & st = mtp->seqs[seq_id];
    if (st.pending < 0) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    std::string(where) + ": nothing was drafted for seq " + std::to_string(seq_id));
    }
    if (n_accepted < 0) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    std::string(where) + ": n_accepted must be >= 0");
    }
    if (n_accepted > st.pending) {
        return fail(LLAMA_MTP_STATUS_ACCEPT_TOO_MANY,
                    std::string(where) + ": cannot accept " + std::to_string(n_accepted) +
                        " tokens, only " + std::to_string(st.pending) + " were drafted");
    }
    if (!st.verified) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    std::string(where) + ": mirror the verification batch with llama_mtp_process "
                                         "before accepting");
    }
    common_speculative_accept(mtp->spec, seq_id, (uint16_t) n_accepted);
    st.pending = -1;
    st.verified = false;
    mtp->stats.n_accepted += (uint64_t) n_accepted;
    mtp->stats.n_steps += 1;
    return LLAMA_MTP_STATUS_OK;
}

// Feed a batch just decoded on the target to the MTP state; marks drafted sequences verified.
llama_mtp_status mirror(llama_mtp * mtp, const common_batch & batch) {
    if (!common_speculative_process(mtp->spec, batch)) {
        return fail(LLAMA_MTP_STATUS_DECODE_FAILED, "llama_mtp_process: MTP context decode failed");
    }
    std::vector<bool> seen(mtp->params.n_seq, false);
    for (const auto & t : batch.tokens) {
        seen[(size_t) t.seq_id] = true;
    }
    for (size_t s = 0; s < seen.size(); ++s) {
        if (seen[s] && mtp->seqs[s].pending >= 0) {
            mtp->seqs[s].verified = true;
        }
    }
    return LLAMA_MTP_STATUS_OK;
}

}  // namespace

extern "C" {

uint32_t llama_mtp_abi_version(void) {
    return LLAMA_MTP_ABI_VERSION;
}

const char * llama_mtp_llama_commit(void) {
    return LLAMA_MTP_LLAMA_COMMIT;
}

const char * llama_mtp_last_error(void) {
    return g_last_error.c_str();
}

llama_mtp_status llama_mtp_default_params(llama_mtp_params * params) {
    return guarded("llama_mtp_default_params", [&]() {
        if (params == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_default_params: params is NULL");
        }
        const uint32_t size = params->struct_size;
        if (size < k_params_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        "llama_mtp_default_params: struct_size " + std::to_string(size) +
                            " is smaller than " + std::to_string(k_params_min_size));
        }
        llama_mtp_params defaults;
        params_defaults(defaults);
        std::memcpy(params, &defaults, sizeof(defaults));
        params->struct_size = size;
        return ok();
    });
}

llama_mtp_status llama_mtp_model_n_nextn_layers(const llama_model * model, int32_t * n_layers) {
    return guarded("llama_mtp_model_n_nextn_layers", [&]() {
        if (model == nullptr || n_layers == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_model_n_nextn_layers: model and n_layers must not be NULL");
        }
        *n_layers = llama_model_n_layer_nextn(model);
        return ok();
    });
}

llama_mtp_status llama_mtp_create(llama_context * ctx_tgt, const llama_mtp_params * params,
                                  llama_mtp ** out) {
    return guarded("llama_mtp_create", [&]() {
        const std::string where = "llama_mtp_create";
        if (out == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": out is NULL");
        }
        *out = nullptr;
        if (ctx_tgt == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": target context is NULL");
        }
        if (params == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": params is NULL");
        }
        if (params->struct_size < k_params_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        where + ": params.struct_size " + std::to_string(params->struct_size) +
                            " is smaller than " + std::to_string(k_params_min_size));
        }
        llama_mtp_params p;
        params_defaults(p);
        std::memcpy(&p, params, std::min<size_t>(params->struct_size, sizeof(p)));
        p.struct_size = sizeof(p);

        if (p.n_max <= 0 || p.n_max > k_max_draft) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": n_max must be in [1, " + std::to_string(k_max_draft) + "], got " +
                            std::to_string(p.n_max) + " (upstream reads 0 as unlimited)");
        }
        if (p.n_min < 0 || p.n_min > p.n_max) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": n_min must be in [0, n_max], got " + std::to_string(p.n_min));
        }
        if (!(p.p_min >= 0.0f && p.p_min <= 1.0f)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": p_min must be in [0, 1]");
        }
        const uint32_t n_seq_max = llama_n_seq_max(ctx_tgt);
        if (p.n_seq == 0 || p.n_seq > n_seq_max) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": n_seq must be in [1, " + std::to_string(n_seq_max) +
                            "] (the target's n_seq_max), got " + std::to_string(p.n_seq));
        }
        if (p.n_threads < 0 || p.n_threads_batch < 0) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": thread counts must be >= 0");
        }

        const llama_model * model = llama_get_model(ctx_tgt);
        if (model == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": target context has no model");
        }
        if (llama_model_n_layer_nextn(model) <= 0) {
            return fail(LLAMA_MTP_STATUS_NO_NEXTN_LAYERS,
                        where + ": the model has no NextN (MTP) layers");
        }
        if (!has_nextn_tensors(model)) {
            return fail(LLAMA_MTP_STATUS_MTP_NOT_LOADED,
                        where + ": the model's NextN tensors are not loaded; load it with "
                                "llama_model_params.load_mtp = true (llama.cpp aborts when it "
                                "builds the MTP graph without them)");
        }
        llama_memory_t mem = llama_get_memory(ctx_tgt);
        if (mem == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": target context has no memory");
        }
        for (uint32_t s = 0; s < n_seq_max; ++s) {
            if (llama_memory_seq_pos_max(mem, (llama_seq_id) s) >= 0) {
                return fail(LLAMA_MTP_STATUS_BAD_STATE,
                            where + ": the target context was already decoded (seq " +
                                std::to_string(s) + " is not empty); create the MTP sidecar first");
            }
        }
        if ((llama_model_is_recurrent(model) || llama_model_is_hybrid(model)) &&
            llama_n_rs_seq(ctx_tgt) < (uint32_t) p.n_max) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": the target has recurrent layers and n_rs_seq " +
                            std::to_string(llama_n_rs_seq(ctx_tgt)) + " < n_max " +
                            std::to_string(p.n_max) + ": rejected drafts could not be rolled back");
        }

        llama_context_params cparams = llama_context_default_params();
        cparams.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
        cparams.n_ctx = llama_n_ctx(ctx_tgt);
        cparams.n_batch = llama_n_batch(ctx_tgt);
        cparams.n_ubatch = llama_n_ubatch(ctx_tgt);
        cparams.n_seq_max = n_seq_max;
        cparams.n_rs_seq = 0;
        cparams.ctx_other = ctx_tgt;
        cparams.n_threads = p.n_threads > 0 ? p.n_threads : llama_n_threads(ctx_tgt);
        cparams.n_threads_batch =
            p.n_threads_batch > 0 ? p.n_threads_batch : llama_n_threads_batch(ctx_tgt);

        auto mtp = std::make_unique<llama_mtp>();
        mtp->ctx_tgt = ctx_tgt;
        mtp->params = p;
        mtp->stats.struct_size = sizeof(mtp->stats);
        mtp->ctx_dft = llama_init_from_model(const_cast<llama_model *>(model), cparams);
        if (mtp->ctx_dft == nullptr) {
            return fail(LLAMA_MTP_STATUS_CONTEXT_FAILED,
                        where + ": llama_init_from_model refused the MTP context");
        }

        common_params_speculative sp;
        sp.types = {COMMON_SPECULATIVE_TYPE_DRAFT_MTP};
        sp.draft.n_max = p.n_max;
        sp.draft.n_min = p.n_min;
        sp.draft.p_min = p.p_min;
        sp.draft.backend_sampling = p.backend_sampling != 0;
        sp.draft.ctx_tgt = ctx_tgt;
        sp.draft.ctx_dft = mtp->ctx_dft;
        mtp->spec = common_speculative_init(sp, p.n_seq);
        if (mtp->spec == nullptr) {
            return fail(LLAMA_MTP_STATUS_CONTEXT_FAILED,
                        where + ": the draft-mtp speculative state could not be initialised");
        }
        mtp->seqs.resize(p.n_seq);
        *out = mtp.release();
        return ok();
    });
}

void llama_mtp_free(llama_mtp * mtp) {
    try {
        delete mtp;
    } catch (...) {
        g_last_error = "llama_mtp_free: exception while freeing";
    }
}

llama_context * llama_mtp_get_context(llama_mtp * mtp) {
    return mtp == nullptr ? nullptr : mtp->ctx_dft;
}

llama_mtp_status llama_mtp_process(llama_mtp * mtp, const llama_batch * batch) {
    return guarded("llama_mtp_process", [&]() {
        const std::string where = "llama_mtp_process";
        if (mtp == nullptr || batch == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": handle and batch must not be NULL");
        }
        const int32_t n = batch->n_tokens;
        if (n <= 0) {
            return ok();
        }
        if (batch->token == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": only token batches can be mirrored (token is NULL)");
        }
        if (batch->pos == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": batch.pos must be set (positions are not inferred)");
        }
        if ((uint32_t) n > llama_n_batch(mtp->ctx_dft)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": batch of " + std::to_string(n) + " tokens exceeds n_batch " +
                            std::to_string(llama_n_batch(mtp->ctx_dft)));
        }
        if (llama_get_embeddings_nextn(mtp->ctx_tgt) == nullptr ||
            llama_get_embeddings_nextn_ith(mtp->ctx_tgt, n - 1) == nullptr) {
            return fail(LLAMA_MTP_STATUS_BAD_STATE,
                        where + ": the target's last decode has fewer than " + std::to_string(n) +
                            " rows; mirror exactly the batch just decoded on the target");
        }
        llama_memory_t mem_tgt = llama_get_memory(mtp->ctx_tgt);
        common_batch cb;
        std::vector<int8_t> finished(mtp->params.n_seq, 0);
        llama_seq_id prev = -1;
        for (int32_t i = 0; i < n; ++i) {
            llama_seq_id s = 0;
            if (batch->seq_id != nullptr) {
                if (batch->n_seq_id != nullptr && batch->n_seq_id[i] != 1) {
                    return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                                where + ": each token must belong to exactly one sequence");
                }
                if (batch->seq_id[i] == nullptr) {
                    return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": batch.seq_id[i] is NULL");
                }
                s = batch->seq_id[i][0];
            }
            const llama_mtp_status st = check_seq(mtp, s);
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
            if (s != prev) {
                if (finished[(size_t) s]) {
                    return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                                where + ": the tokens of each sequence must be contiguous in the batch");
                }
                if (prev >= 0) {
                    finished[(size_t) prev] = 1;
                }
                prev = s;
            }
            const llama_pos pos_max = llama_memory_seq_pos_max(mem_tgt, s);
            if (batch->pos[i] < 0 || batch->pos[i] > pos_max) {
                return fail(LLAMA_MTP_STATUS_BAD_STATE,
                            where + ": position " + std::to_string(batch->pos[i]) + " of seq " +
                                std::to_string(s) + " is not in the target context (last: " +
                                std::to_string(pos_max) +
                                "); decode the batch on the target before mirroring it");
            }
            const bool output = batch->logits == nullptr ? (i == n - 1) : batch->logits[i] != 0;
            cb.add(batch->token[i], batch->pos[i], s, output);
        }
        const llama_mtp_status st = mirror(mtp, cb);
        return st == LLAMA_MTP_STATUS_OK ? ok() : st;
    });
}

llama_mtp_status llama_mtp_begin(llama_mtp * mtp, llama_seq_id seq_id, const llama_token * prompt,
                                 int32_t n_prompt) {
    return guarded("llama_mtp_begin", [&]() {
        if (mtp == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_begin: handle is NULL");
        }
        llama_mtp_status st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (n_prompt < 0 || (n_prompt > 0 && prompt == nullptr)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_begin: prompt is NULL or n_prompt < 0");
        }
        seq_state & s = mtp->seqs[seq_id];
        s.prompt.assign(prompt, prompt + n_prompt);
        s.pending = -1;
        s.verified = false;
        common_speculative_begin(mtp->spec, seq_id, s.prompt);
        return ok();
    });
}

llama_mtp_status llama_mtp_draft(llama_mtp * mtp, llama_seq_id seq_id, llama_token id_last,
                                 llama_pos pos0, int32_t n_max, llama_token * draft,
                                 int32_t capacity, int32_t * n_draft) {
    return guarded("llama_mtp_draft", [&]() {
        if (mtp == nullptr || n_draft == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_draft: handle and n_draft must not be NULL");
        }
        *n_draft = 0;
        llama_mtp_status st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (n_max <= 0) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_draft: n_max must be >= 1 (upstream reads 0 as unlimited)");
        }
        if (capacity < 0 || (capacity > 0 && draft == nullptr)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_draft: draft is NULL or capacity < 0");
        }
        if (capacity < std::min(n_max, mtp->params.n_max)) {
            return fail(LLAMA_MTP_STATUS_BUFFER_TOO_SMALL,
                        "llama_mtp_draft: capacity " + std::to_string(capacity) +
                            " < min(n_max, params.n_max)");
        }
        st = do_draft(mtp, seq_id, id_last, pos0, n_max);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        const auto & d = mtp->seqs[seq_id].draft;
        std::copy(d.begin(), d.end(), draft);
        *n_draft = (int32_t) d.size();
        return ok();
    });
}

llama_mtp_status llama_mtp_accept(llama_mtp * mtp, llama_seq_id seq_id, int32_t n_accepted) {
    return guarded("llama_mtp_accept", [&]() {
        if (mtp == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_accept: handle is NULL");
        }
        const llama_mtp_status st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        const llama_mtp_status r = do_accept(mtp, seq_id, n_accepted, "llama_mtp_accept");
        return r == LLAMA_MTP_STATUS_OK ? ok() : r;
    });
}

llama_mtp_status llama_mtp_seq_rm(llama_mtp * mtp, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    return guarded("llama_mtp_seq_rm", [&]() {
        if (mtp == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_seq_rm: handle is NULL");
        }
        const llama_mtp_status st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (p0 < 0 || (p1 >= 0 && p1 < p0)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_seq_rm: need 0 <= p0 and (p1 < 0 or p0 <= p1)");
        }
        remove_range(mtp, seq_id, p0, p1);
        return ok();
    });
}

llama_mtp_status llama_mtp_step(llama_mtp * mtp, llama_seq_id seq_id, llama_sampler * smpl,
                                llama_token id_last, llama_pos n_past, llama_token * tokens,
                                int32_t capacity, int32_t * n_tokens) {
    return guarded("llama_mtp_step", [&]() {
        const std::string where = "llama_mtp_step";
        if (mtp == nullptr || smpl == nullptr || tokens == nullptr || n_tokens == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": handle, sampler, tokens and n_tokens must not be NULL");
        }
        *n_tokens = 0;
        llama_mtp_status st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (capacity < 1) {
            return fail(LLAMA_MTP_STATUS_BUFFER_TOO_SMALL, where + ": capacity must be >= 1");
        }
        if (n_past < 0) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": n_past must be >= 0");
        }
        const int64_t room = (int64_t) llama_n_ctx(mtp->ctx_tgt) - n_past - 1;
        if (room < 0) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": the target context is full");
        }
        int64_t n_max = std::min<int64_t>({(int64_t) mtp->params.n_max, (int64_t) capacity - 1, room,
                                           (int64_t) llama_n_batch(mtp->ctx_tgt) - 1});
        seq_state & ss = mtp->seqs[seq_id];
        ss.draft.clear();
        if (n_max > 0) {
            st = do_draft(mtp, seq_id, id_last, n_past, (int32_t) n_max);
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
        } else {
            ss.pending = 0;
            ss.verified = false;
        }
        const llama_tokens draft = ss.draft;

        if (!mtp->batch_tgt) {
            mtp->batch_tgt = std::make_unique<common_batch>(mtp->ctx_tgt);
        }
        common_batch & b = *mtp->batch_tgt;
        b.clear();
        b.add(id_last, n_past, seq_id, true);
        for (size_t i = 0; i < draft.size(); ++i) {
            b.add(draft[i], n_past + 1 + (llama_pos) i, seq_id, true);
        }
        const int32_t rc = llama_process(mtp->ctx_tgt, LLAMA_PROCESS_TYPE_DECODE, b.get());
        if (rc != 0) {
            remove_range(mtp, seq_id, n_past, -1);
            ss.pending = -1;
            return fail(LLAMA_MTP_STATUS_DECODE_FAILED,
                        where + ": target decode failed with " + std::to_string(rc));
        }
        st = mirror(mtp, b);
        if (st != LLAMA_MTP_STATUS_OK) {
            remove_range(mtp, seq_id, n_past, -1);
            ss.pending = -1;
            return st;
        }

        const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(mtp->ctx_tgt));
        std::vector<llama_token> out;
        out.reserve(draft.size() + 1);
        size_t i = 0;
        for (; i < draft.size(); ++i) {
            const llama_token id = llama_sampler_sample(smpl, mtp->ctx_tgt, (int32_t) i);
            out.push_back(id);
            if (id != draft[i] || (llama_vocab_is_eog(vocab, id) && i + 1 < draft.size())) {
                break;
            }
        }
        if (i == draft.size()) {
            out.push_back(llama_sampler_sample(smpl, mtp->ctx_tgt, (int32_t) i));
        }
        const int32_t n_accepted = (int32_t) out.size() - 1;
        st = do_accept(mtp, seq_id, n_accepted, where.c_str());
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        remove_range(mtp, seq_id, n_past + 1 + n_accepted, -1);

        ss.prompt.push_back(id_last);
        ss.prompt.insert(ss.prompt.end(), out.begin(), out.end() - 1);
        std::copy(out.begin(), out.end(), tokens);
        *n_tokens = (int32_t) out.size();
        return ok();
    });
}

llama_mtp_status llama_mtp_get_stats(const llama_mtp * mtp, llama_mtp_stats * stats) {
    return guarded("llama_mtp_get_stats", [&]() {
        if (mtp == nullptr || stats == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_get_stats: handle and stats must not be NULL");
        }
        const uint32_t size = stats->struct_size;
        if (size < k_stats_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        "llama_mtp_get_stats: struct_size " + std::to_string(size) +
                            " is smaller than " + std::to_string(k_stats_min_size));
        }
        std::memcpy(stats, &mtp->stats, sizeof(mtp->stats));
        stats->struct_size = size;
        return ok();
    });
}

llama_mtp_status llama_mtp_reset_stats(llama_mtp * mtp) {
    return guarded("llama_mtp_reset_stats", [&]() {
        if (mtp == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_reset_stats: handle is NULL");
        }
        mtp->stats = llama_mtp_stats{};
        mtp->stats.struct_size = sizeof(mtp->stats);
        return ok();
    });
}

}  // extern "C"
