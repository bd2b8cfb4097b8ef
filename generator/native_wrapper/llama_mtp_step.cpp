// The speculative step of llama_mtp_step and llama_mtp_step_many (see llama_mtp.h): each item's
// sequence drafts, one target decode verifies every item's [id_last, draft...] rows, the batch is
// mirrored once into the strategies, then each item samples its rows with its own sampler,
// accepts the agreeing prefix and rolls back the rest. One item is llama_mtp_step.

#include "llama_mtp_sidecar.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

namespace up = llama_mtp_upstream;

namespace llama_mtp_impl {

namespace {

// One item's step, from its checks to its tokens.
struct part {
    llama_mtp_step_item * item;
    std::string where;       // the item's name in messages
    bool taking_part = false;  // passed its checks and drafted: it has rows in the batch
    up::token_list draft;
    int32_t first_row = 0;   // its first row in the verification batch
    std::vector<llama_token> out;
    bool undo = false;       // its first row selected no token: the step is undone for it
    int32_t n_max = 0;       // its draft cap this step
    std::string error;       // why it failed (llama_mtp_last_error's text then)
};

// A failure of one item (the message llama_mtp_last_error has now, named after the item).
void record(part & p, llama_mtp_status status) {
    p.item->status = status;
    p.item->n_tokens = 0;
    p.item->first_row = -1;
    p.taking_part = false;
    const std::string message = llama_mtp_last_error();
    p.error = message.rfind(p.where, 0) == 0 ? message : p.where + ": " + message;
}

// The checks of llama_mtp_step, in its order, before anything is decoded.
llama_mtp_status check_item(llama_mtp * mtp, part & p, std::unordered_set<llama_seq_id> & seen) {
    const llama_mtp_step_item & it = *p.item;
    if (it.smpl == nullptr || it.tokens == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    p.where + ": sampler, tokens and n_tokens must not be NULL");
    }
    llama_mtp_status st = check_seq(mtp, it.seq_id);
    if (st != LLAMA_MTP_STATUS_OK) {
        return st;
    }
    if (!seen.insert(it.seq_id).second) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    p.where + ": seq " + std::to_string(it.seq_id) + " is in an earlier item too");
    }
    if (it.capacity < 1) {
        return fail(LLAMA_MTP_STATUS_BUFFER_TOO_SMALL, p.where + ": capacity must be >= 1");
    }
    if (it.n_past < 0) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, p.where + ": n_past must be >= 0");
    }
    st = check_token(mtp, it.id_last, p.where + ": id_last");
    if (st != LLAMA_MTP_STATUS_OK) {
        return st;
    }
    if (mtp->seqs[(size_t) it.seq_id].pending > 0) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    p.where + ": a draft of seq " + std::to_string(it.seq_id) +
                        " from llama_mtp_draft was not accepted yet (call llama_mtp_accept)");
    }
    // Checked before anything is decoded: a wrong n_past must not reach the rollback, which would
    // remove cells the caller decoded.
    st = check_next_pos(mtp, it.seq_id, it.n_past, p.where + ": n_past");
    if (st != LLAMA_MTP_STATUS_OK) {
        return st;
    }
    st = preflight_sampler(mtp, it.seq_id, it.smpl);
    if (st != LLAMA_MTP_STATUS_OK) {
        return st;
    }
    if ((int64_t) llama_n_ctx(mtp->ctx_tgt) - it.n_past - 1 < 0) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, p.where + ": the target context is full");
    }
    return LLAMA_MTP_STATUS_OK;
}

// The rows one step may decode: the target's batch, and its output limit where readable.
int64_t row_limit(llama_mtp * mtp) {
    int64_t limit = (int64_t) llama_n_batch(mtp->ctx_tgt);
    uint32_t n_outputs_max = 0;
    if (up::n_outputs_max(mtp->ctx_tgt, n_outputs_max) && n_outputs_max > 0) {
        limit = std::min<int64_t>(limit, n_outputs_max);
    }
    return limit;
}

llama_mtp_status draft_item(llama_mtp * mtp, part & p) {
    llama_mtp_step_item & it = *p.item;
    seq_state & ss = mtp->seqs[(size_t) it.seq_id];
    const uint64_t backend_before = mtp->stats.n_backend_sampled;
    ss.draft.clear();
    if (p.n_max > 0) {
        const llama_mtp_status st = do_draft(mtp, it.seq_id, it.id_last, it.n_past, p.n_max);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
    } else {
        ss.pending = 0;
        ss.winner = -1;
        ss.verified = false;
    }
    p.draft = ss.draft;
    it.n_drafted = (int32_t) p.draft.size();
    it.strategy = p.draft.empty() ? -1 : ss.winner;
    it.backend_sampled = mtp->stats.n_backend_sampled != backend_before ? 1 : 0;
    return LLAMA_MTP_STATUS_OK;
}

// Undo an item's step: the target and draft cells from n_past on are the step's own. A recurrent
// target rolls back at most n_rs_seq tokens; its message says so when it cannot.
void roll_back(llama_mtp * mtp, part & p) {
    const llama_mtp_step_item & it = *p.item;
    const bool undone =
        llama_memory_seq_rm(llama_get_memory(mtp->ctx_tgt), it.seq_id, it.n_past, -1);
    if (mtp->ctx_dft != nullptr) {
        llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), it.seq_id, it.n_past, -1);
    }
    seq_state & ss = mtp->seqs[(size_t) it.seq_id];
    ss.pending = -1;
    ss.winner = -1;
    ss.verified = false;
    if (!undone) {
        p.error += "; the target could not be rolled back (n_rs_seq < 1 + n_max): seq " +
                   std::to_string(it.seq_id) + " keeps this step's tokens from position " +
                   std::to_string(it.n_past) + ", clear it with llama_mtp_seq_rm";
    }
}

// Sample an item's rows until the draft disagrees, it ends, or a row selects no token.
llama_mtp_status sample_item(llama_mtp * mtp, part & p, const llama_vocab * vocab) {
    for (size_t i = 0; i <= p.draft.size(); ++i) {
        llama_token id = LLAMA_TOKEN_NULL;
        const llama_mtp_status st = sample_row(mtp, p.item->smpl, p.first_row + (int32_t) i, id);
        if (st != LLAMA_MTP_STATUS_OK) {
            if (p.out.empty()) {
                return st;
            }
            // Rows before this one matched the draft and were accepted by the sampler: keep them,
            // the last as the target's next token.
            break;
        }
        p.out.push_back(id);
        if (i == p.draft.size() || id != p.draft[i] || llama_vocab_is_eog(vocab, id)) {
            break;
        }
    }
    return LLAMA_MTP_STATUS_OK;
}

llama_mtp_status finish_item(llama_mtp * mtp, part & p) {
    llama_mtp_step_item & it = *p.item;
    const int32_t n_accepted = (int32_t) p.out.size() - 1;
    const llama_mtp_status st = do_accept(mtp, it.seq_id, n_accepted, p.where.c_str());
    if (st != LLAMA_MTP_STATUS_OK) {
        return st;
    }
    remove_range(mtp, it.seq_id, it.n_past + 1 + n_accepted, -1);
    seq_state & ss = mtp->seqs[(size_t) it.seq_id];
    ss.prompt.push_back(it.id_last);
    ss.prompt.insert(ss.prompt.end(), p.out.begin(), p.out.end() - 1);
    std::copy(p.out.begin(), p.out.end(), it.tokens);
    it.n_tokens = (int32_t) p.out.size();
    return LLAMA_MTP_STATUS_OK;
}

// The checked parts' drafts, their one decode, mirror, sampling, accepts and rollbacks.
void run_group(llama_mtp * mtp, std::vector<part *> & parts);

}  // namespace

bool verifies_together(const llama_mtp * mtp) {
    return mtp->captured_layers.empty() && !mtp->reads_final_states;
}

llama_mtp_status run_steps(llama_mtp * mtp, const std::vector<llama_mtp_step_item *> & items,
                           const std::string & where) {
    std::vector<part> parts;
    parts.reserve(items.size());
    std::unordered_set<llama_seq_id> seen;
    for (size_t i = 0; i < items.size(); ++i) {
        part p;
        p.item = items[i];
        p.where = items.size() == 1 ? where : where + " (item " + std::to_string(i) + ")";
        const llama_mtp_status st = check_item(mtp, p, seen);
        if (st != LLAMA_MTP_STATUS_OK) {
            record(p, st);
        } else {
            p.taking_part = true;
        }
        parts.push_back(std::move(p));
    }
    // A draft that reads the target's layers (EAGLE-3, DFlash, DSpark) reads their rows in the
    // order llama.cpp computed them, ubatch by ubatch; a batch of several sequences may be split
    // and reordered (a KV buffer per sequence splits it per sequence), so those drafts' sequences
    // are verified one decode each, as llama_mtp_step does.
    const bool one_by_one = !verifies_together(mtp);
    std::vector<part *> group;
    for (part & p : parts) {
        if (p.taking_part) {
            group.push_back(&p);
        }
        if (one_by_one && !group.empty()) {
            for (const part & earlier : parts) {
                earlier.item->first_row = -1;  // that decode's rows are gone after this one
            }
            run_group(mtp, group);
            group.clear();
        }
    }
    if (!group.empty()) {
        run_group(mtp, group);
    }
    for (const part & p : parts) {
        if (p.item->status != LLAMA_MTP_STATUS_OK) {
            return fail((llama_mtp_status) p.item->status, p.error);
        }
    }
    return ok();
}

namespace {

void run_group(llama_mtp * mtp, std::vector<part *> & group) {
    const int64_t n_taking = (int64_t) group.size();
    const int64_t per_item = n_taking > 0 ? row_limit(mtp) / n_taking : 0;
    for (part * pp : group) {
        part & p = *pp;
        if (!p.taking_part) {
            continue;
        }
        const llama_mtp_step_item & it = *p.item;
        if (per_item < 1) {
            fail(LLAMA_MTP_STATUS_BUFFER_TOO_SMALL,
                 p.where + ": " + std::to_string(n_taking) + " sequences in one step, more rows "
                 "than the target's batch (llama_n_batch) or output limit takes");
            record(p, LLAMA_MTP_STATUS_BUFFER_TOO_SMALL);
            continue;
        }
        const int64_t room = (int64_t) llama_n_ctx(mtp->ctx_tgt) - it.n_past - 1;
        p.n_max = (int32_t) std::min<int64_t>(
            {(int64_t) mtp->params.n_max, (int64_t) it.capacity - 1, room, per_item - 1});
        const llama_mtp_status st = draft_item(mtp, p);
        if (st != LLAMA_MTP_STATUS_OK) {
            record(p, st);
        }
    }

    if (!mtp->batch_tgt) {
        mtp->batch_tgt = std::make_unique<up::batch>();
    }
    up::batch & b = *mtp->batch_tgt;
    b.clear();
    int32_t rows = 0;
    for (part * pp : group) {
        part & p = *pp;
        if (!p.taking_part) {
            continue;
        }
        llama_mtp_step_item & it = *p.item;
        p.first_row = rows;
        p.item->first_row = rows;
        b.add(it.id_last, it.n_past, it.seq_id, true);
        for (size_t i = 0; i < p.draft.size(); ++i) {
            b.add(p.draft[i], it.n_past + 1 + (llama_pos) i, it.seq_id, true);
        }
        rows += 1 + (int32_t) p.draft.size();
    }
    if (rows > 0) {
        const int32_t rc = up::decode(mtp->ctx_tgt, b);
        if (rc != 0) {
            for (part * pp : group) {
                part & p = *pp;
                if (p.taking_part) {
                    fail(LLAMA_MTP_STATUS_DECODE_FAILED,
                         p.where + ": target decode failed with " + std::to_string(rc));
                    record(p, LLAMA_MTP_STATUS_DECODE_FAILED);
                    roll_back(mtp, p);
                }
            }
            rows = 0;
        }
    }
    if (rows > 0) {
        // Sample before mirroring, so that when no item selects a token on its first row the
        // strategies' state stays as it was: the step is then undone as if it had not been called.
        const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(mtp->ctx_tgt));
        bool any_sampled = false;
        for (part * pp : group) {
            part & p = *pp;
            if (!p.taking_part) {
                continue;
            }
            const llama_mtp_status st = sample_item(mtp, p, vocab);
            if (st != LLAMA_MTP_STATUS_OK) {
                record(p, st);
                p.undo = true;
            } else {
                any_sampled = true;
            }
        }
        const llama_mtp_status mirrored = any_sampled ? mirror(mtp, b) : LLAMA_MTP_STATUS_OK;
        for (part * pp : group) {
            part & p = *pp;
            if (p.undo) {
                if (any_sampled && mirrored == LLAMA_MTP_STATUS_OK) {
                    // mirrored with the others: the strategies hear of no accepted token
                    do_accept(mtp, p.item->seq_id, 0, p.where.c_str(), false);
                }
                roll_back(mtp, p);
                continue;
            }
            if (!p.taking_part) {
                continue;
            }
            const llama_mtp_status st = mirrored == LLAMA_MTP_STATUS_OK ? finish_item(mtp, p) : mirrored;
            if (st != LLAMA_MTP_STATUS_OK) {
                record(p, st);
                roll_back(mtp, p);
            }
        }
    }
}

}  // namespace

}  // namespace llama_mtp_impl
