// The sidecar's state and logic (see llama_mtp_sidecar.h).

#include "llama_mtp_sidecar.h"

#include "llama_mtp_layer_drafts.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#ifndef LLAMA_MTP_LLAMA_COMMIT
#    define LLAMA_MTP_LLAMA_COMMIT "unknown"
#endif
#ifndef LLAMA_MTP_LLAMA_TAG
#    define LLAMA_MTP_LLAMA_TAG "unknown tag"
#endif

// Architectures whose MTP graph asserts exactly one NextN layer in this tree, comma-separated
// (the build reads them from src/models/; see generator/native/nextn_archs.py).
#ifndef LLAMA_MTP_SINGLE_NEXTN_ARCHS
#    define LLAMA_MTP_SINGLE_NEXTN_ARCHS ""
#endif

namespace up = llama_mtp_upstream;

llama_mtp::~llama_mtp() {
    for (auto & slot : slots) {
        up::release(slot.spec);
    }
    if (ctx_dft != nullptr) {
        llama_free(ctx_dft);
    }
    // The target (still alive: the sidecar is freed first) stops exporting the layer inputs an
    // EAGLE-3/DFlash/DSpark draft read.
    up::stop_layer_capture(ctx_tgt, captured_layers);
}

namespace llama_mtp_impl {

namespace {

constexpr int32_t k_vocab_max_size_difference = 128;  // upstream's SPEC_VOCAB_MAX_SIZE_DIFFERENCE
constexpr int32_t k_vocab_check_start_token = 5;      // upstream's SPEC_VOCAB_CHECK_START_TOKEN_ID

// which throws; checked here first so that a mismatch is a status with the reason).
llama_mtp_status check_vocab(const llama_model * tgt, const llama_model * dft, const std::string & where) {
    const llama_vocab * vt = llama_model_get_vocab(tgt);
    const llama_vocab * vd = llama_model_get_vocab(dft);
    auto mismatch = [&](const std::string & what) {
        return fail(LLAMA_MTP_STATUS_VOCAB_MISMATCH,
                    where + ": the draft model's vocabulary is not the target's (" + what + ")");
    };
    if (llama_vocab_type(vt) != llama_vocab_type(vd)) {
        return mismatch("vocabulary types " + std::to_string((int) llama_vocab_type(vd)) + " and " +
                        std::to_string((int) llama_vocab_type(vt)));
    }
    if (llama_vocab_get_add_bos(vt) != llama_vocab_get_add_bos(vd) ||
        (llama_vocab_get_add_bos(vt) && llama_vocab_bos(vt) != llama_vocab_bos(vd))) {
        return mismatch("different BOS tokens");
    }
    if (llama_vocab_get_add_eos(vt) != llama_vocab_get_add_eos(vd) ||
        (llama_vocab_get_add_eos(vt) && llama_vocab_eos(vt) != llama_vocab_eos(vd))) {
        return mismatch("different EOS tokens");
    }
    const int32_t nt = llama_vocab_n_tokens(vt);
    const int32_t nd = llama_vocab_n_tokens(vd);
    if (std::abs(nt - nd) > k_vocab_max_size_difference) {
        return mismatch(std::to_string(nd) + " tokens against " + std::to_string(nt));
    }
    for (int32_t i = k_vocab_check_start_token; i < std::min(nt, nd); ++i) {
        if (std::strcmp(llama_vocab_get_text(vt, i), llama_vocab_get_text(vd, i)) != 0) {
            return mismatch("token " + std::to_string(i) + " differs");
        }
    }
    return LLAMA_MTP_STATUS_OK;
}

}  // namespace

void params_defaults(llama_mtp_params & p) {
    std::memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.n_max = LLAMA_MTP_DRAFT_DEFAULT;
    p.n_min = 0;
    p.p_min = 0.0f;
    p.n_seq = 1;
    // llama.cpp's own default where the tree has draft backend sampling; off where it has none.
    p.backend_sampling = up::defaults().backend_sampling ? 1 : 0;
    p.n_threads = 0;
    p.n_threads_batch = 0;
    p.strategies = nullptr;
    p.n_strategies = 0;
    p.draft_n_ctx = 0;
    p.draft_model = nullptr;
}
llama_mtp_status check_seq(const llama_mtp * mtp, llama_seq_id seq_id) {
    if (seq_id < 0 || (uint32_t) seq_id >= mtp->params.n_seq) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    "seq_id " + std::to_string(seq_id) + " is outside [0, " +
                        std::to_string(mtp->params.n_seq) + ")");
    }
    return LLAMA_MTP_STATUS_OK;
}

llama_mtp_status check_token(const llama_mtp * mtp, llama_token token, const std::string & what) {
    if (token < 0 || token >= mtp->n_vocab) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    what + " " + std::to_string(token) + " is outside the vocabulary [0, " +
                        std::to_string(mtp->n_vocab) + ")");
    }
    return LLAMA_MTP_STATUS_OK;
}

// id_last goes at `pos`, right after what the target holds for the sequence.
llama_mtp_status check_next_pos(const llama_mtp * mtp, llama_seq_id seq_id, llama_pos pos,
                                const std::string & what) {
    const llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(mtp->ctx_tgt), seq_id);
    if (pos != pos_max + 1) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    what + " " + std::to_string(pos) + " is not the next position of seq " +
                        std::to_string(seq_id) + " (the target holds positions up to " +
                        std::to_string(pos_max) + ", so it must be " + std::to_string(pos_max + 1) +
                        ")");
    }
    return LLAMA_MTP_STATUS_OK;
}

void remove_range(llama_mtp * mtp, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    llama_memory_seq_rm(llama_get_memory(mtp->ctx_tgt), seq_id, p0, p1);
    if (mtp->ctx_dft != nullptr) {
        llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), seq_id, p0, p1);
    }
}

// Sample row `idx` of the target's last decode with the caller's sampler, as llama_sampler_sample
// does, but report a sampler that selects no token instead of aborting. Accepts the token.
llama_mtp_status sample_row(llama_mtp * mtp, llama_sampler * smpl, int32_t idx, llama_token & out) {
    llama_context * ctx = mtp->ctx_tgt;
    const llama_token backend_token = llama_get_sampled_token_ith(ctx, idx);
    if (backend_token != LLAMA_TOKEN_NULL) {
        llama_sampler_accept(smpl, backend_token);
        out = backend_token;
        return LLAMA_MTP_STATUS_OK;
    }
    auto & cand = mtp->candidates;
    const float * probs = llama_get_sampled_probs_ith(ctx, idx);
    const float * logits = llama_get_sampled_logits_ith(ctx, idx);
    const llama_token * ids = llama_get_sampled_candidates_ith(ctx, idx);
    if (probs != nullptr && ids != nullptr) {
        cand.resize(llama_get_sampled_probs_count_ith(ctx, idx));
        for (size_t k = 0; k < cand.size(); ++k) {
            cand[k] = llama_token_data{ids[k], logits != nullptr ? logits[k] : 0.0f, probs[k]};
        }
    } else if (logits != nullptr && ids != nullptr) {
        cand.resize(llama_get_sampled_logits_count_ith(ctx, idx));
        for (size_t k = 0; k < cand.size(); ++k) {
            cand[k] = llama_token_data{ids[k], logits[k], 0.0f};
        }
    } else {
        const float * row = llama_get_logits_ith(ctx, idx);
        if (row == nullptr) {
            return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR,
                        "llama_mtp_step: the target has no logits for row " + std::to_string(idx));
        }
        cand.resize((size_t) mtp->n_vocab);
        for (llama_token t = 0; t < mtp->n_vocab; ++t) {
            cand[(size_t) t] = llama_token_data{t, row[t], 0.0f};
        }
    }
    llama_token_data_array arr{cand.data(), cand.size(), -1, false};
    llama_sampler_apply(smpl, &arr);
    if (arr.selected < 0 || (size_t) arr.selected >= arr.size) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    "llama_mtp_step: the sampler selected no token (selected = " +
                        std::to_string(arr.selected) + " of " + std::to_string(arr.size) +
                        " candidates); end the sampler chain with a selecting sampler such as "
                        "greedy or dist");
    }
    out = arr.data[arr.selected].id;
    llama_sampler_accept(smpl, out);
    return LLAMA_MTP_STATUS_OK;
}

// Before a step decodes anything: does the sampler select a token at all? A copy of it is applied
// to the target's last logits (or flat ones), so that a chain without a selecting sampler fails
// while the step can still be refused whole (a recurrent target cannot roll back 1 + n_max
// tokens). Checked once per sampler; a sampler without clone support is not checked here.
llama_mtp_status preflight_sampler(llama_mtp * mtp, llama_seq_id seq_id, llama_sampler * smpl) {
    const llama_sampler *& checked = mtp->seqs[(size_t) seq_id].checked_sampler;
    if (checked == smpl) {
        return LLAMA_MTP_STATUS_OK;
    }
    llama_sampler * probe = llama_sampler_clone(smpl);
    if (probe == nullptr) {
        return LLAMA_MTP_STATUS_OK;
    }
    const float * row = llama_get_logits_ith(mtp->ctx_tgt, -1);
    std::vector<llama_token_data> cand((size_t) mtp->n_vocab);
    for (llama_token t = 0; t < mtp->n_vocab; ++t) {
        cand[(size_t) t] = llama_token_data{t, row != nullptr ? row[t] : 0.0f, 0.0f};
    }
    llama_token_data_array arr{cand.data(), cand.size(), -1, false};
    llama_sampler_apply(probe, &arr);
    llama_sampler_free(probe);
    if (arr.selected < 0 || (size_t) arr.selected >= arr.size) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    "llama_mtp_step: the sampler selects no token (an empty chain, or one without a "
                    "selecting sampler such as greedy or dist at its end); nothing was decoded");
    }
    checked = smpl;
    return LLAMA_MTP_STATUS_OK;
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
    const int32_t limit = std::min(n_max, mtp->params.n_max);
    // EAGLE-3 seeds its draft with the row it deferred; when the target went back since (a
    // checkpoint or state loaded) that row is not id_last's, and it is not asked this step.
    const bool stale_seed = mtp->defers_last_row && st.deferred >= 0 && st.deferred + 1 != pos0;
    auto ask = [&](strategy_slot & slot) {
        st.draft.clear();
        if (stale_seed && slot.info->draft_context) {
            return false;
        }
        up::draft(slot.spec, seq_id, id_last, pos0, limit, &st.prompt, &st.draft);
        // A draft model's vocabulary may be a little larger than the target's: cut the draft
        // before a token the target does not have.
        for (size_t i = 0; i < st.draft.size(); ++i) {
            if (st.draft[i] < 0 || st.draft[i] >= mtp->n_vocab) {
                st.draft.resize(i);
                break;
            }
        }
        if (!st.draft.empty()) {
            slot.drafted[(size_t) seq_id] = true;
        }
        return !st.draft.empty();
    };
    st.winner = -1;
    bool backend_sampled = false;
    for (size_t i = 0; i < mtp->slots.size(); ++i) {
        if (ask(mtp->slots[i])) {
            st.winner = (int32_t) i;
            // The draft context's last decode was the draft's own: when llama.cpp sampled it on
            // the backend (backend_sampling, and the chain could be offloaded), it kept the
            // candidates there.
            backend_sampled = mtp->slots[i].info->draft_context &&
                              llama_get_sampled_candidates_count_ith(mtp->ctx_dft, -1) > 0;
            break;
        }
    }
    // A draft-context strategy hears of accepted tokens only once upstream has recorded a draft
    // of it for the sequence (accepting otherwise asserts): when a draftless strategy drafts
    // first, the draft-context one drafts once as well, its draft discarded.
    for (auto & slot : mtp->slots) {
        if (st.winner >= 0 && slot.info->draft_context && !slot.drafted[(size_t) seq_id]) {
            const up::token_list winning = st.draft;
            ask(slot);
            st.draft = winning;
        }
    }

    // The draft context now holds KV for [pos0, ...) written while drafting; the verification
    // batch will be mirrored there, so drop it.
    if (mtp->ctx_dft != nullptr) {
        llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), seq_id, pos0, -1);
    }

    st.pending = (int32_t) st.draft.size();
    st.verified = false;
    if (st.pending > 0) {
        mtp->stats.n_drafts += 1;
        mtp->stats.n_drafted += (uint64_t) st.pending;
        mtp->stats.n_backend_sampled += backend_sampled ? 1 : 0;
        mtp->slots[(size_t) st.winner].stats.n_drafted += (uint64_t) st.pending;
    }
    return LLAMA_MTP_STATUS_OK;
}

llama_mtp_status do_accept(llama_mtp * mtp, llama_seq_id seq_id, int32_t n_accepted,
                           const char * where, bool count_step) {
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
    // The strategy that drafted accepts; a draft-context strategy that did not is told too (it
    // continues from the hidden state of the last accepted token). Draftless strategies ignore
    // other strategies' drafts upstream (is_other), so they are not told.
    for (size_t i = 0; i < mtp->slots.size(); ++i) {
        strategy_slot & slot = mtp->slots[i];
        const bool won = (int32_t) i == st.winner;
        if (won || (slot.info->draft_context && slot.drafted[(size_t) seq_id])) {
            up::accept(slot.spec, seq_id, (uint16_t) n_accepted);
            if (slot.info->draft_context && mtp->defers_last_row && st.mirrored_rows > 0) {
                // EAGLE-3's bridge row moves to the last accepted token (its accept)
                st.deferred = st.mirrored_first + std::min(n_accepted, st.mirrored_rows - 1);
            }
        }
        if (won) {
            slot.stats.n_drafts += 1;
            slot.stats.n_accepted += (uint64_t) n_accepted;
        }
    }
    st.pending = -1;
    st.winner = -1;
    st.verified = false;
    mtp->stats.n_accepted += (uint64_t) n_accepted;
    mtp->stats.n_steps += count_step ? 1 : 0;
    return LLAMA_MTP_STATUS_OK;
}

// A draft that reads the target's layers writes the draft rows of a token batch at the target's
// positions, and llama.cpp takes a sequence's batch only right after what its memory holds. After
// the target went back (a checkpoint or a saved state loaded, a prefix kept) the draft may hold
// less than that; EAGLE-3 also defers each batch's last row to the next one (its bridge row, at
// `deferred`). Where neither lines up, the sequence's draft memory is cleared: drafts start over
// from this batch (poorer for a while, never wrong) instead of the draft's decode failing.
static void realign_draft(llama_mtp * mtp, const up::batch & batch) {
    std::vector<llama_pos> first(mtp->params.n_seq, -1), last(mtp->params.n_seq, -1);
    std::vector<int32_t> rows(mtp->params.n_seq, 0);
    for (const auto & e : batch.entries()) {
        if (e.token == LLAMA_TOKEN_NULL) {
            return;  // media rows: EAGLE-3 skips them, DFlash injects them where they stand
        }
        const size_t s = (size_t) e.seq_id;
        first[s] = first[s] < 0 ? e.pos[0] : first[s];
        last[s] = e.pos[0];
        rows[s] += 1;
    }
    llama_memory_t mem = llama_get_memory(mtp->ctx_dft);
    for (size_t s = 0; s < first.size(); ++s) {
        if (first[s] < 0) {
            continue;
        }
        seq_state & st = mtp->seqs[s];
        const llama_pos held = llama_memory_seq_pos_max(mem, (llama_seq_id) s);
        const bool bridged = st.deferred >= 0 && st.deferred == first[s] - 1 && st.deferred > held;
        if (held >= 0 && held != first[s] - 1 && !bridged) {
            llama_memory_seq_rm(mem, (llama_seq_id) s, -1, -1);
        }
        st.mirrored_first = first[s];
        st.mirrored_rows = rows[s];
        st.deferred = mtp->defers_last_row ? last[s] : -1;
    }
}

// Feed a batch just decoded on the target to the MTP state; marks drafted sequences verified.
llama_mtp_status mirror(llama_mtp * mtp, const up::batch & batch) {
    if (!mtp->captured_layers.empty() || mtp->reads_final_states) {
        realign_draft(mtp, batch);
    }
    if (mtp->reads_final_states && !up::target_has_final_states(mtp->ctx_tgt)) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    "llama_mtp_process: the EAGLE-3 draft reads the target's final hidden states, "
                    "and the target's last decode kept none");
    }
    for (auto & slot : mtp->slots) {
        if (!up::process(slot.spec, batch, mtp->ctx_tgt)) {
            return fail(LLAMA_MTP_STATUS_DECODE_FAILED,
                        std::string("llama_mtp_process: the ") + slot.info->name +
                            " draft context's decode failed");
        }
    }
    std::vector<bool> seen(mtp->params.n_seq, false);
    for (const auto & e : batch.entries()) {
        seen[(size_t) e.seq_id] = true;
    }
    for (size_t s = 0; s < seen.size(); ++s) {
        if (seen[s] && mtp->seqs[s].pending >= 0) {
            mtp->seqs[s].verified = true;
        }
    }
    return LLAMA_MTP_STATUS_OK;
}


// draft-mtp: the model must have NextN layers, loaded, and not more of them than its MTP graph takes.
static llama_mtp_status check_mtp_model(const llama_model * model, const std::string & where) {
    const int32_t n_nextn = up::n_nextn_layers(model);
    if (n_nextn <= 0) {
        return fail(LLAMA_MTP_STATUS_NO_NEXTN_LAYERS, where + ": the model has no NextN (MTP) layers");
    }
    char arch[128] = {0};
    if (n_nextn > 1 && llama_model_meta_val_str(model, "general.architecture", arch, sizeof(arch)) > 0 &&
        in_list(LLAMA_MTP_SINGLE_NEXTN_ARCHS, arch)) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": the model has " + std::to_string(n_nextn) +
                        " NextN layers, but llama.cpp " + LLAMA_MTP_LLAMA_COMMIT + " builds the " +
                        arch + " MTP graph for exactly one (it aborts otherwise)");
    }
    if (!up::has_nextn_tensors(model)) {
        return fail(LLAMA_MTP_STATUS_MTP_NOT_LOADED,
                    where + ": the model's NextN tensors are not loaded; load it with "
                            "llama_model_params.load_mtp = true (llama.cpp aborts when it builds "
                            "the MTP graph without them)");
    }
    return LLAMA_MTP_STATUS_OK;
}

// Any strategy: the target is still empty, and it can verify and roll back a whole draft.
static llama_mtp_status check_target(llama_context * ctx_tgt, const llama_model * model,
                              const llama_mtp_params & p, const std::string & where) {
    llama_memory_t mem = llama_get_memory(ctx_tgt);
    if (mem == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": target context has no memory");
    }
    const uint32_t n_seq_max = llama_n_seq_max(ctx_tgt);
    for (uint32_t s = 0; s < n_seq_max; ++s) {
        if (llama_memory_seq_pos_max(mem, (llama_seq_id) s) >= 0) {
            return fail(LLAMA_MTP_STATUS_BAD_STATE,
                        where + ": the target context was already decoded (seq " + std::to_string(s) +
                            " is not empty); create the sidecar first");
        }
    }
    if ((llama_model_is_recurrent(model) || llama_model_is_hybrid(model)) &&
        llama_n_rs_seq(ctx_tgt) < (uint32_t) p.n_max) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": the target has recurrent layers and n_rs_seq " +
                        std::to_string(llama_n_rs_seq(ctx_tgt)) + " < n_max " +
                        std::to_string(p.n_max) + ": rejected drafts could not be rolled back");
    }
    // A step decodes 1 + n_max outputs at once; llama.cpp aborts when that exceeds the target's
    // n_outputs_max (where the tree has one and it is readable: not from a Windows libllama,
    // which exports only llama.h).
    uint32_t n_outputs_max = 0;
    if (up::n_outputs_max(ctx_tgt, n_outputs_max) && n_outputs_max < (uint32_t) p.n_max + 1) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": the target takes at most " + std::to_string(n_outputs_max) +
                        " outputs per batch, fewer than 1 + n_max = " + std::to_string(p.n_max + 1) +
                        "; create it with llama_context_params.n_outputs_max = 0 (n_batch) or >= 1 + "
                        "n_max, or lower n_max");
    }
    return LLAMA_MTP_STATUS_OK;
}

// Whether the target keeps one KV buffer for every sequence (llama.h has no getter): a target
// with a stream per sequence gives each n_ctx / n_seq_max cells, a unified one all of n_ctx.
static bool kv_unified(llama_context * ctx_tgt) {
    return llama_n_seq_max(ctx_tgt) > 1 && llama_n_ctx_seq(ctx_tgt) == llama_n_ctx(ctx_tgt);
}

// The draft and MTP contexts keep their KV cache as the target does, so that a saved state of
// one sequence loads wherever the target's loads.
static llama_context_params draft_context_params(llama_context * ctx_tgt, const llama_mtp_params & p) {
    llama_context_params cparams = llama_context_default_params();
    cparams.kv_unified = kv_unified(ctx_tgt);
    cparams.n_ctx = llama_n_ctx(ctx_tgt);
    cparams.n_batch = llama_n_batch(ctx_tgt);
    cparams.n_ubatch = llama_n_ubatch(ctx_tgt);
    cparams.n_threads = p.n_threads > 0 ? p.n_threads : llama_n_threads(ctx_tgt);
    cparams.n_threads_batch = p.n_threads_batch > 0 ? p.n_threads_batch : llama_n_threads_batch(ctx_tgt);
    return cparams;
}

static llama_context * create_mtp_context(llama_context * ctx_tgt, const llama_model * model,
                                   const llama_mtp_params & p) {
    llama_context_params cparams = draft_context_params(ctx_tgt, p);
    up::mtp_context_params(cparams, ctx_tgt);
    cparams.n_seq_max = llama_n_seq_max(ctx_tgt);
    cparams.n_rs_seq = 0;
    return llama_init_from_model(const_cast<llama_model *>(model), cparams);
}

// The caller's draft model, with as many sequences as the sidecar serves (upstream requires it).
// draft-simple: room to roll back a rejected draft when the draft model is recurrent. A draft that
// reads the target's layers (EAGLE-3, DFlash, DSpark) shares the target's tensors it lacks
// (ctx_other, as llama.cpp's server sets it) and decodes a whole draft block in one ubatch.
static llama_context * create_draft_context(llama_context * ctx_tgt, const llama_mtp_params & p,
                                            bool reads_layers) {
    llama_context_params cparams = draft_context_params(ctx_tgt, p);
    if (p.draft_n_ctx > 0) {
        cparams.n_ctx = (uint32_t) p.draft_n_ctx;
    }
    cparams.n_seq_max = p.n_seq;
    cparams.n_rs_seq = reads_layers ? 0 : (uint32_t) p.n_max;
    if (reads_layers) {
        up::layer_draft_context_params(cparams, ctx_tgt, (uint32_t) p.n_max + 1);
        cparams.n_ubatch = std::max(cparams.n_ubatch, (uint32_t) p.n_max + 1);
        cparams.n_batch = std::max(cparams.n_batch, cparams.n_ubatch);
    }
    return llama_init_from_model(p.draft_model, cparams);
}

static up::speculative * init_strategy(const llama_mtp_strategy & s, llama_context * ctx_tgt,
                                llama_context * ctx_dft, const llama_mtp_params & p) {
    up::strategy_config c;
    c.upstream_type = up::upstream_strategy_type(s.type);
    c.n_max = p.n_max;
    c.n_min = p.n_min;
    c.p_min = p.p_min;
    c.backend_sampling = p.backend_sampling != 0;
    c.ctx_tgt = ctx_tgt;
    c.ctx_dft = ctx_dft;
    c.size_n = s.size_n;
    c.size_m = s.size_m;
    c.min_hits = s.min_hits;
    c.n_match = s.n_match;
    c.mod_n_min = s.mod_n_min;
    c.mod_n_max = s.mod_n_max;
    c.cache_static = s.cache_static != nullptr ? s.cache_static : "";
    c.cache_dynamic = s.cache_dynamic != nullptr ? s.cache_dynamic : "";
    return up::init(c, p.n_seq);
}

// The caller's params, checked and completed with the defaults into p.
llama_mtp_status read_params(llama_context * ctx_tgt, const llama_mtp_params * params,
                             llama_mtp_params & p, const std::string & where) {
    if (params->struct_size < k_params_min_size) {
        return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                    where + ": params.struct_size " + std::to_string(params->struct_size) +
                        " is smaller than " + std::to_string(k_params_min_size));
    }
    params_defaults(p);
    // A struct_size short of this header's struct is a first-release caller: its fields only.
    std::memcpy(&p, params, params->struct_size >= sizeof(p) ? sizeof(p) : k_params_min_size);
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
    if (p.draft_n_ctx < 0) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": draft_n_ctx must be >= 0");
    }
    if (p.backend_sampling != 0 && !up::has_backend_sampling()) {
        return fail(LLAMA_MTP_STATUS_NOT_IN_RELEASE,
                    where + ": backend_sampling is not in this llama.cpp release (" +
                        LLAMA_MTP_LLAMA_TAG + ": common_params_speculative_draft has no "
                        "backend_sampling); set params.backend_sampling = 0");
    }
    return LLAMA_MTP_STATUS_OK;
}

// The strategies, checked one by one and as a mix; draft_type: the draft-context one (0: none).
llama_mtp_status read_strategies(const llama_mtp_params & p, std::vector<llama_mtp_strategy> & list,
                                 int32_t & draft_type, const std::string & where) {
    if (p.strategies == nullptr || p.n_strategies == 0) {
        if (p.strategies == nullptr && p.n_strategies > 0) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": strategies is NULL but n_strategies is " +
                            std::to_string(p.n_strategies));
        }
        list.emplace_back();
        strategy_defaults(LLAMA_MTP_STRATEGY_DRAFT_MTP, list.back());
    } else {
        if (p.n_strategies > n_strategy_types()) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": n_strategies " + std::to_string(p.n_strategies) +
                            " is more than there are strategies");
        }
        for (uint32_t i = 0; i < p.n_strategies; ++i) {
            const llama_mtp_strategy & given = p.strategies[i];
            const std::string what = where + ": strategies[" + std::to_string(i) + "]";
            if (given.struct_size < k_strategy_min_size) {
                return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                            what + ".struct_size " + std::to_string(given.struct_size) +
                                " is smaller than " + std::to_string(k_strategy_min_size));
            }
            llama_mtp_strategy copy;
            strategy_defaults(given.type, copy);
            std::memcpy(&copy, &given, std::min<size_t>(given.struct_size, sizeof(copy)));
            copy.struct_size = sizeof(copy);
            const llama_mtp_status st = check_strategy(copy, what);
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
            for (const auto & earlier : list) {
                if (earlier.type == copy.type) {
                    return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                                what + ": " + find_strategy(copy.type)->name + " is listed twice");
                }
            }
            list.push_back(copy);
        }
    }
    draft_type = 0;
    for (const auto & s : list) {
        if (!find_strategy(s.type)->draft_context) {
            continue;
        }
        if (draft_type != 0) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_STRATEGY,
                        where + ": " + find_strategy(draft_type)->name + " and " +
                            find_strategy(s.type)->name +
                            " both need a draft context; llama.cpp mixes n-gram strategies with "
                            "at most one of them");
        }
        draft_type = s.type;
    }
    const bool wants_draft_model = draft_type != 0 && draft_type != LLAMA_MTP_STRATEGY_DRAFT_MTP;
    if (wants_draft_model && p.draft_model == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": " + find_strategy(draft_type)->name +
                        " needs a draft model (params.draft_model)");
    }
    if (!wants_draft_model && p.draft_model != nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": params.draft_model is set, but no strategy listed uses a draft "
                            "model (draft-simple, draft-eagle3, draft-dflash and draft-dspark do)");
    }
    return LLAMA_MTP_STATUS_OK;
}

// The target (and the draft model) can run the strategies.
llama_mtp_status check_models(llama_context * ctx_tgt, const llama_mtp_params & p, int32_t draft_type,
                              const std::string & where) {
    const llama_model * model = llama_get_model(ctx_tgt);
    if (model == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": target context has no model");
    }
    llama_mtp_status st = LLAMA_MTP_STATUS_OK;
    if (draft_type == LLAMA_MTP_STRATEGY_DRAFT_MTP) {
        st = check_mtp_model(model, where);
    } else if (p.draft_model != nullptr) {
        st = check_vocab(model, p.draft_model, where);
        if (st == LLAMA_MTP_STATUS_OK && find_strategy(draft_type)->reads_target_layers) {
            st = check_layer_draft(ctx_tgt, p, draft_type, where);
        }
    }
    return st != LLAMA_MTP_STATUS_OK ? st : check_target(ctx_tgt, model, p, where);
}

// The draft context and one common_speculative per strategy, in upstream's order.
llama_mtp_status build_sidecar(llama_mtp & sidecar, const std::vector<llama_mtp_strategy> & list,
                               int32_t draft_type, const std::string & where) {
    const llama_mtp_params & p = sidecar.params;
    const llama_model * model = llama_get_model(sidecar.ctx_tgt);
    sidecar.has_mtp = draft_type == LLAMA_MTP_STRATEGY_DRAFT_MTP;
    sidecar.stats.struct_size = sizeof(sidecar.stats);
    if (draft_type != 0) {
        const bool reads_layers = find_strategy(draft_type)->reads_target_layers;
        sidecar.ctx_dft = sidecar.has_mtp ? create_mtp_context(sidecar.ctx_tgt, model, p)
                                          : create_draft_context(sidecar.ctx_tgt, p, reads_layers);
        if (sidecar.ctx_dft == nullptr) {
            return fail(LLAMA_MTP_STATUS_CONTEXT_FAILED,
                        where + ": llama_init_from_model refused the " +
                            find_strategy(draft_type)->name + " draft context");
        }
    }
    if (draft_type != 0 && find_strategy(draft_type)->reads_target_layers) {
        // upstream turns the capture on when it initialises the strategy, below
        sidecar.captured_layers = captured_layers(model, p.draft_model, draft_type);
        sidecar.reads_final_states = reads_final_states(model, p.draft_model, draft_type);
        sidecar.defers_last_row = draft_type == LLAMA_MTP_STRATEGY_DRAFT_EAGLE3;
    }
    for (const strategy_info * info = strategies_begin(); info != strategies_end(); ++info) {
        for (const auto & s : list) {
            if (s.type != info->type) {
                continue;
            }
            strategy_slot slot;
            slot.info = info;
            slot.drafted.assign(p.n_seq, false);
            slot.stats.struct_size = sizeof(slot.stats);
            slot.stats.type = info->type;
            slot.spec = init_strategy(s, sidecar.ctx_tgt, sidecar.ctx_dft, p);
            sidecar.slots.push_back(slot);
            if (slot.spec == nullptr) {
                return fail(LLAMA_MTP_STATUS_CONTEXT_FAILED,
                            where + ": the " + info->name + " speculative state could not be initialised");
            }
        }
    }
    sidecar.seqs.resize(p.n_seq);
    sidecar.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    return LLAMA_MTP_STATUS_OK;
}

}  // namespace llama_mtp_impl
