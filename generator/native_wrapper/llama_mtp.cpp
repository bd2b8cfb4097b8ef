// The C ABI of llama_mtp.h: argument checks, handle bookkeeping, exceptions and status codes
// around the sidecar (llama_mtp_sidecar.cpp), which drives upstream through llama_mtp_upstream.
//
// Every entry point checks the preconditions that upstream enforces with GGML_ASSERT (which
// aborts the process) and returns a status instead, and catches every C++ exception.
//
// Strategies: each configured strategy gets an upstream speculative state of its own (one
// implementation each), asked in upstream's order of preference; the first non-empty draft is
// verified. Keeping them apart is what lets the wrapper count drafts and acceptance per strategy
// (upstream keeps its per-implementation counters private). Upstream's accept() tells the other
// implementations how many tokens were accepted (is_other); of those, only the draft-context ones
// use it (draft-mtp picks the hidden-state row to continue from), so the wrapper forwards the
// count to the draft-context strategy once it has drafted for the sequence.

#include "llama_mtp.h"
#include "llama_mtp_guard.h"
#include "llama_mtp_sidecar.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#ifndef LLAMA_MTP_LLAMA_COMMIT
#    define LLAMA_MTP_LLAMA_COMMIT "unknown"
#endif

namespace up = llama_mtp_upstream;
using namespace llama_mtp_impl;

namespace {

thread_local std::string g_last_error;

// Every llama_mtp_status, its name made from the enumerator (llama_mtp.h's rule: the suffix in
// lower case). tests/native checks that every enumerator of the header has its row.
struct status_row {
    int32_t status;
    const char * enumerator;  // the enumerator's suffix ("NOT_IN_RELEASE")
};
#define LLAMA_MTP_STATUS_ROW(suffix) {LLAMA_MTP_STATUS_##suffix, #suffix}
const status_row k_status_rows[] = {
    LLAMA_MTP_STATUS_ROW(OK),
    LLAMA_MTP_STATUS_ROW(INVALID_ARGUMENT),
    LLAMA_MTP_STATUS_ROW(UNSUPPORTED_VERSION),
    LLAMA_MTP_STATUS_ROW(NO_NEXTN_LAYERS),
    LLAMA_MTP_STATUS_ROW(MTP_NOT_LOADED),
    LLAMA_MTP_STATUS_ROW(BAD_STATE),
    LLAMA_MTP_STATUS_ROW(ACCEPT_TOO_MANY),
    LLAMA_MTP_STATUS_ROW(CONTEXT_FAILED),
    LLAMA_MTP_STATUS_ROW(DECODE_FAILED),
    LLAMA_MTP_STATUS_ROW(BUFFER_TOO_SMALL),
    LLAMA_MTP_STATUS_ROW(INTERNAL_ERROR),
    LLAMA_MTP_STATUS_ROW(UNSUPPORTED_STRATEGY),
    LLAMA_MTP_STATUS_ROW(VOCAB_MISMATCH),
    LLAMA_MTP_STATUS_ROW(FILE_UNREADABLE),
    LLAMA_MTP_STATUS_ROW(NOT_IN_RELEASE),
    LLAMA_MTP_STATUS_ROW(TEMPLATE_ERROR),
    LLAMA_MTP_STATUS_ROW(SCHEMA_ERROR),
    LLAMA_MTP_STATUS_ROW(PARSE_ERROR),
    LLAMA_MTP_STATUS_ROW(DRAFT_MISMATCH),
};
#undef LLAMA_MTP_STATUS_ROW

const std::vector<std::pair<int32_t, std::string>> & status_names() {
    static const std::vector<std::pair<int32_t, std::string>> names = [] {
        std::vector<std::pair<int32_t, std::string>> out;
        for (const status_row & row : k_status_rows) {
            std::string name(row.enumerator);
            for (char & c : name) {
                c = (char) std::tolower((unsigned char) c);
            }
            out.emplace_back(row.status, name);
        }
        return out;
    }();
    return names;
}

}  // namespace

namespace llama_mtp_impl {

llama_mtp_status fail(llama_mtp_status status, const std::string & message) {
    g_last_error = message;
    return status;
}

llama_mtp_status ok() {
    g_last_error.clear();
    return LLAMA_MTP_STATUS_OK;
}

}  // namespace llama_mtp_impl

namespace {

// Live handles: a freed or foreign pointer is refused without being dereferenced.
live_set<llama_mtp> g_handles;

void register_handle(const llama_mtp * h) {
    g_handles.add(h);
}

bool unregister_handle(const llama_mtp * h) {
    return g_handles.remove(h);
}

bool is_live(const llama_mtp * h) {
    return g_handles.contains(h);
}

llama_mtp_status check_handle(const llama_mtp * h, const char * where) {
    if (h == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, std::string(where) + ": handle is NULL");
    }
    if (!is_live(h)) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    std::string(where) + ": handle is not a live llama_mtp (already freed, or not "
                                         "returned by llama_mtp_create)");
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
        std::memcpy(params, &defaults, size >= sizeof(defaults) ? sizeof(defaults) : k_params_min_size);
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
        *n_layers = up::n_nextn_layers(model);
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
        llama_mtp_params p;
        std::vector<llama_mtp_strategy> list;
        int32_t draft_type = 0;
        llama_mtp_status st = read_params(ctx_tgt, params, p, where);
        if (st == LLAMA_MTP_STATUS_OK) {
            st = read_strategies(p, list, draft_type, where);
        }
        if (st == LLAMA_MTP_STATUS_OK) {
            st = check_models(ctx_tgt, p, draft_type, where);
        }
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        auto mtp = std::make_unique<llama_mtp>();
        mtp->ctx_tgt = ctx_tgt;
        mtp->params = p;
        mtp->params.strategies = nullptr;  // the caller's array is not kept
        st = build_sidecar(*mtp, list, draft_type, where);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        *out = mtp.release();
        register_handle(*out);
        return ok();
    });
}

void llama_mtp_free(llama_mtp * mtp) {
    try {
        if (mtp == nullptr) {
            return;
        }
        if (!unregister_handle(mtp)) {
            g_last_error = "llama_mtp_free: handle is not a live llama_mtp (already freed, or not "
                           "returned by llama_mtp_create); nothing was freed";
            return;
        }
        delete mtp;
    } catch (...) {
        g_last_error = "llama_mtp_free: exception while freeing";
    }
}

llama_context * llama_mtp_get_context(llama_mtp * mtp) {
    return mtp != nullptr && is_live(mtp) ? mtp->ctx_dft : nullptr;
}

llama_mtp_status llama_mtp_process(llama_mtp * mtp, const llama_batch * batch) {
    return guarded("llama_mtp_process", [&]() {
        const std::string where = "llama_mtp_process";
        llama_mtp_status hs = check_handle(mtp, "llama_mtp_process");
        if (hs != LLAMA_MTP_STATUS_OK) {
            return hs;
        }
        if (batch == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": batch is NULL");
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
        for (int32_t i = 0; i < n; ++i) {
            hs = check_token(mtp, batch->token[i], where + ": batch.token[" + std::to_string(i) + "]");
            if (hs != LLAMA_MTP_STATUS_OK) {
                return hs;
            }
        }
        if (mtp->ctx_dft != nullptr && (uint32_t) n > llama_n_batch(mtp->ctx_dft)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": batch of " + std::to_string(n) + " tokens exceeds the draft "
                                "context's n_batch " + std::to_string(llama_n_batch(mtp->ctx_dft)));
        }
        if ((uint32_t) n > llama_n_batch(mtp->ctx_tgt)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": batch of " + std::to_string(n) + " tokens exceeds n_batch " +
                            std::to_string(llama_n_batch(mtp->ctx_tgt)));
        }
        if (mtp->has_mtp && !up::target_has_rows(mtp->ctx_tgt, n)) {
            return fail(LLAMA_MTP_STATUS_BAD_STATE,
                        where + ": the target's last decode has fewer than " + std::to_string(n) +
                            " rows; mirror exactly the batch just decoded on the target");
        }
        llama_memory_t mem_tgt = llama_get_memory(mtp->ctx_tgt);
        up::batch cb;
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

llama_mtp_status llama_mtp_embd_supported(int32_t * supported) {
    return guarded("llama_mtp_embd_supported", [&]() {
        if (supported == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_embd_supported: supported is NULL");
        }
        *supported = up::batch_takes_embeddings() ? 1 : 0;
        return ok();
    });
}

llama_mtp_status llama_mtp_process_embd(llama_mtp * mtp, llama_seq_id seq_id, const float * embd,
                                        int32_t n_tokens, int32_t n_embd, const llama_pos * pos,
                                        int32_t n_pos) {
    return guarded("llama_mtp_process_embd", [&]() {
        const std::string where = "llama_mtp_process_embd";
        llama_mtp_status st = check_handle(mtp, "llama_mtp_process_embd");
        if (st == LLAMA_MTP_STATUS_OK) {
            st = check_seq(mtp, seq_id);
        }
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (!up::batch_takes_embeddings()) {
            return fail(LLAMA_MTP_STATUS_NOT_IN_RELEASE,
                        where + ": this llama.cpp release's speculative decoding takes token "
                                "batches only; decode media without speculation with this release");
        }
        if (embd == nullptr || pos == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": embd and pos must be set");
        }
        if (n_tokens <= 0) {
            return ok();
        }
        const int32_t width = llama_model_n_embd_inp(llama_get_model(mtp->ctx_tgt));
        if (n_embd != width) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": rows of " + std::to_string(n_embd) + " floats; the target "
                                "model's input width is " + std::to_string(width));
        }
        if (n_pos < 1 || n_pos > LLAMA_MTP_MAX_POS_PER_ROW) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": n_pos must be 1.." + std::to_string(LLAMA_MTP_MAX_POS_PER_ROW));
        }
        if ((uint32_t) n_tokens > llama_n_batch(mtp->ctx_tgt) ||
            (mtp->ctx_dft != nullptr && (uint32_t) n_tokens > llama_n_batch(mtp->ctx_dft))) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": " + std::to_string(n_tokens) + " rows exceed n_batch");
        }
        if (mtp->seqs[(size_t) seq_id].pending >= 0) {
            return fail(LLAMA_MTP_STATUS_BAD_STATE,
                        where + ": seq " + std::to_string(seq_id) + " has a draft awaiting "
                                "verification; media can only follow a finished step");
        }
        const llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(mtp->ctx_tgt), seq_id);
        up::batch rows;
        llama_pos row_pos[LLAMA_MTP_MAX_POS_PER_ROW];
        for (int32_t i = 0; i < n_tokens; ++i) {
            for (int32_t j = 0; j < n_pos; ++j) {
                row_pos[j] = pos[(size_t) j * (size_t) n_tokens + (size_t) i];
            }
            if (row_pos[0] < 0 || row_pos[0] > pos_max) {
                return fail(LLAMA_MTP_STATUS_BAD_STATE,
                            where + ": position " + std::to_string(row_pos[0]) + " of seq " +
                                std::to_string(seq_id) + " is not in the target context (last: " +
                                std::to_string(pos_max) + "); decode the rows on the target first");
            }
            rows.add_embd(embd + (size_t) i * (size_t) n_embd, n_embd, row_pos, n_pos, seq_id);
        }
        st = mirror(mtp, rows);
        return st == LLAMA_MTP_STATUS_OK ? ok() : st;
    });
}

llama_mtp_status llama_mtp_begin(llama_mtp * mtp, llama_seq_id seq_id, const llama_token * prompt,
                                 int32_t n_prompt) {
    return guarded("llama_mtp_begin", [&]() {
        llama_mtp_status st = check_handle(mtp, "llama_mtp_begin");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (n_prompt < 0 || (n_prompt > 0 && prompt == nullptr)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_begin: prompt is NULL or n_prompt < 0");
        }
        for (int32_t i = 0; i < n_prompt; ++i) {
            st = check_token(mtp, prompt[i], "llama_mtp_begin: prompt[" + std::to_string(i) + "]");
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
        }
        seq_state & s = mtp->seqs[seq_id];
        s.prompt.assign(prompt, prompt + n_prompt);
        s.pending = -1;
        s.verified = false;
        s.winner = -1;
        for (auto & slot : mtp->slots) {
            up::begin(slot.spec, seq_id, s.prompt);
        }
        return ok();
    });
}

llama_mtp_status llama_mtp_draft(llama_mtp * mtp, llama_seq_id seq_id, llama_token id_last,
                                 llama_pos pos0, int32_t n_max, llama_token * draft,
                                 int32_t capacity, int32_t * n_draft) {
    return guarded("llama_mtp_draft", [&]() {
        llama_mtp_status st = check_handle(mtp, "llama_mtp_draft");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (n_draft == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_draft: n_draft is NULL");
        }
        *n_draft = 0;
        st = check_seq(mtp, seq_id);
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
        st = check_token(mtp, id_last, "llama_mtp_draft: id_last");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (pos0 >= 0 && mtp->seqs[seq_id].pending <= 0) {
            st = check_next_pos(mtp, seq_id, pos0, "llama_mtp_draft: pos0");
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
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
        llama_mtp_status st = check_handle(mtp, "llama_mtp_accept");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        const llama_mtp_status r = do_accept(mtp, seq_id, n_accepted, "llama_mtp_accept");
        return r == LLAMA_MTP_STATUS_OK ? ok() : r;
    });
}

llama_mtp_status llama_mtp_seq_rm(llama_mtp * mtp, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    return guarded("llama_mtp_seq_rm", [&]() {
        llama_mtp_status st = check_handle(mtp, "llama_mtp_seq_rm");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (p0 < 0 || (p1 >= 0 && p1 < p0)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_seq_rm: need 0 <= p0 and (p1 < 0 or p0 <= p1)");
        }
        const std::string range = "[" + std::to_string(p0) + ", " +
                                  (p1 < 0 ? std::string("end") : std::to_string(p1)) + ") of seq " +
                                  std::to_string(seq_id);
        if (!llama_memory_seq_rm(llama_get_memory(mtp->ctx_tgt), seq_id, p0, p1)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_seq_rm: llama.cpp refused to remove " + range +
                            " from the target (recurrent memory drops only a sequence's tail, "
                            "within n_rs_seq positions, or the whole sequence); nothing was removed");
        }
        if (mtp->ctx_dft != nullptr &&
            !llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), seq_id, p0, p1)) {
            return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR,
                        "llama_mtp_seq_rm: removed " + range +
                            " from the target, but the MTP context refused; call llama_mtp_begin "
                            "again for this sequence");
        }
        mtp->seqs[seq_id].pending = -1;
        mtp->seqs[seq_id].winner = -1;
        mtp->seqs[seq_id].verified = false;
        return ok();
    });
}

llama_mtp_status llama_mtp_step(llama_mtp * mtp, llama_seq_id seq_id, llama_sampler * smpl,
                                llama_token id_last, llama_pos n_past, llama_token * tokens,
                                int32_t capacity, int32_t * n_tokens) {
    return guarded("llama_mtp_step", [&]() {
        const std::string where = "llama_mtp_step";
        llama_mtp_status st = check_handle(mtp, "llama_mtp_step");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (smpl == nullptr || tokens == nullptr || n_tokens == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": sampler, tokens and n_tokens must not be NULL");
        }
        *n_tokens = 0;
        llama_mtp_step_item item{};
        item.struct_size = sizeof(item);
        item.seq_id = seq_id;
        item.smpl = smpl;
        item.id_last = id_last;
        item.n_past = n_past;
        item.tokens = tokens;
        item.capacity = capacity;
        item.strategy = -1;
        item.first_row = -1;
        st = run_steps(mtp, {&item}, where);
        *n_tokens = item.n_tokens;
        return st;
    });
}

llama_mtp_status llama_mtp_step_many(llama_mtp * mtp, llama_mtp_step_item * items, int32_t n_items) {
    return guarded("llama_mtp_step_many", [&]() {
        const std::string where = "llama_mtp_step_many";
        const llama_mtp_status st = check_handle(mtp, "llama_mtp_step_many");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (n_items < 0 || (n_items > 0 && items == nullptr)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": items is NULL or n_items < 0");
        }
        if (n_items == 0) {
            return ok();
        }
        // the caller's struct_size is the array's stride (a newer header's items are larger)
        const uint32_t stride = items[0].struct_size;
        if (stride < sizeof(llama_mtp_step_item)) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        where + ": struct_size " + std::to_string(stride) + " is smaller than " +
                            std::to_string(sizeof(llama_mtp_step_item)));
        }
        std::vector<llama_mtp_step_item *> list;
        auto * bytes = reinterpret_cast<unsigned char *>(items);
        for (int32_t i = 0; i < n_items; ++i) {
            auto * item = reinterpret_cast<llama_mtp_step_item *>(bytes + (size_t) i * stride);
            if (item->struct_size != stride) {
                return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                            where + ": item " + std::to_string(i) + " has struct_size " +
                                std::to_string(item->struct_size) + ", item 0 " +
                                std::to_string(stride) + " (all must be the same)");
            }
            item->n_tokens = 0;
            item->n_drafted = 0;
            item->strategy = -1;
            item->backend_sampled = 0;
            item->first_row = -1;
            item->status = LLAMA_MTP_STATUS_OK;
            list.push_back(item);
        }
        return run_steps(mtp, list, where);
    });
}

int32_t llama_mtp_step_many_together(const llama_mtp * mtp) {
    if (mtp == nullptr || !is_live(mtp)) {
        return -1;
    }
    return verifies_together(mtp) ? 1 : 0;
}

llama_mtp_status llama_mtp_get_stats(const llama_mtp * mtp, llama_mtp_stats * stats) {
    return guarded("llama_mtp_get_stats", [&]() {
        const llama_mtp_status hs = check_handle(mtp, "llama_mtp_get_stats");
        if (hs != LLAMA_MTP_STATUS_OK) {
            return hs;
        }
        if (stats == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_get_stats: stats is NULL");
        }
        const uint32_t size = stats->struct_size;
        if (size < k_stats_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        "llama_mtp_get_stats: struct_size " + std::to_string(size) +
                            " is smaller than " + std::to_string(k_stats_min_size));
        }
        std::memcpy(stats, &mtp->stats, std::min<size_t>(size, sizeof(mtp->stats)));
        stats->struct_size = size;
        return ok();
    });
}

llama_mtp_status llama_mtp_reset_stats(llama_mtp * mtp) {
    return guarded("llama_mtp_reset_stats", [&]() {
        const llama_mtp_status hs = check_handle(mtp, "llama_mtp_reset_stats");
        if (hs != LLAMA_MTP_STATUS_OK) {
            return hs;
        }
        mtp->stats = llama_mtp_stats{};
        mtp->stats.struct_size = sizeof(mtp->stats);
        for (auto & slot : mtp->slots) {
            slot.stats = llama_mtp_strategy_stats{};
            slot.stats.struct_size = sizeof(slot.stats);
            slot.stats.type = slot.info->type;
        }
        return ok();
    });
}

int32_t llama_mtp_n_strategies(const llama_mtp * mtp) {
    return mtp != nullptr && is_live(mtp) ? (int32_t) mtp->slots.size() : -1;
}

llama_mtp_status llama_mtp_get_strategy_stats(const llama_mtp * mtp, int32_t index,
                                              llama_mtp_strategy_stats * stats) {
    return guarded("llama_mtp_get_strategy_stats", [&]() {
        const std::string where = "llama_mtp_get_strategy_stats";
        const llama_mtp_status hs = check_handle(mtp, "llama_mtp_get_strategy_stats");
        if (hs != LLAMA_MTP_STATUS_OK) {
            return hs;
        }
        if (stats == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": stats is NULL");
        }
        if (index < 0 || (size_t) index >= mtp->slots.size()) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": index " + std::to_string(index) + " is outside [0, " +
                            std::to_string(mtp->slots.size()) + ")");
        }
        const uint32_t size = stats->struct_size;
        if (size < k_strategy_stats_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        where + ": struct_size " + std::to_string(size) + " is smaller than " +
                            std::to_string(k_strategy_stats_min_size));
        }
        const llama_mtp_strategy_stats & own = mtp->slots[(size_t) index].stats;
        std::memcpy(stats, &own, std::min<size_t>(size, sizeof(own)));
        stats->struct_size = size;
        return ok();
    });
}

llama_mtp_status llama_mtp_default_strategy(int32_t type, llama_mtp_strategy * strategy) {
    return guarded("llama_mtp_default_strategy", [&]() {
        const std::string where = "llama_mtp_default_strategy";
        if (strategy == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": strategy is NULL");
        }
        const uint32_t size = strategy->struct_size;
        if (size < k_strategy_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        where + ": struct_size " + std::to_string(size) + " is smaller than " +
                            std::to_string(k_strategy_min_size));
        }
        if (find_strategy(type) == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": " + std::to_string(type) + " is not a llama_mtp_strategy_type");
        }
        llama_mtp_strategy defaults;
        strategy_defaults(type, defaults);
        std::memcpy(strategy, &defaults, sizeof(defaults));
        strategy->struct_size = size;
        return ok();
    });
}

llama_mtp_status llama_mtp_strategy_supported(int32_t type) {
    return guarded("llama_mtp_strategy_supported", [&]() {
        const llama_mtp_status st = strategy_support(type, "llama_mtp_strategy_supported");
        return st == LLAMA_MTP_STATUS_OK ? ok() : st;
    });
}

const char * llama_mtp_strategy_name(int32_t type) {
    const strategy_info * info = find_strategy(type);
    return info != nullptr ? info->name.c_str() : nullptr;
}

const char * llama_mtp_status_name(int32_t status) {
    try {
        for (const auto & entry : status_names()) {
            if (entry.first == status) {
                return entry.second.c_str();
            }
        }
    } catch (...) {  // the table could not be built (out of memory)
    }
    return nullptr;
}

}  // extern "C"

