// The sidecar's state and logic: one llama_mtp handle (the target context, the draft context of a
// draft-context strategy, one upstream speculative state per strategy, per-sequence bookkeeping)
// and the steps the C ABI is made of (read the parameters, check the models, build the sidecar,
// draft, mirror, accept). Tag-independent: llama.cpp internals come from llama_mtp_upstream.

#pragma once

#include "llama_mtp.h"
#include "llama_mtp_strategies.h"
#include "llama_mtp_upstream.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llama_mtp_impl {

constexpr int32_t k_max_draft = LLAMA_MTP_DRAFT_MAX;  // upstream counts accepted tokens in a uint16_t

// Smallest struct_size this library accepts (every field of the first release).
constexpr uint32_t k_params_min_size = offsetof(llama_mtp_params, strategies);
constexpr uint32_t k_strategy_min_size = sizeof(llama_mtp_strategy);
constexpr uint32_t k_strategy_stats_min_size = sizeof(llama_mtp_strategy_stats);
// The first release's llama_mtp_stats ended after n_steps; later fields are written only to
// callers whose struct_size covers them.
constexpr uint32_t k_stats_min_size = offsetof(llama_mtp_stats, n_backend_sampled);

struct seq_state {
    int32_t pending = -1;      // size of the last draft not yet accepted; -1: none
    int32_t winner = -1;       // strategy index whose draft is pending; -1: none (empty draft)
    bool verified = false;     // a batch for this sequence was mirrored after that draft
    llama_mtp_upstream::token_list prompt;  // what upstream's draft slot points at
    llama_mtp_upstream::token_list draft;   // upstream writes the draft here
    // A draft reading the target's layers: where the last mirrored token batch of the sequence
    // began, its rows, and the position EAGLE-3 left for its next bridge row (-1: none).
    llama_pos mirrored_first = -1;
    int32_t mirrored_rows = 0;
    llama_pos deferred = -1;
    const llama_sampler * checked_sampler = nullptr;  // last sampler seen to select a token
};

// One configured strategy: its own upstream speculative state (one implementation) and counters.
struct strategy_slot {
    const strategy_info * info = nullptr;
    llama_mtp_upstream::speculative * spec = nullptr;
    std::vector<bool> drafted;  // per sequence: upstream has recorded a draft of it (impl_last)
    llama_mtp_strategy_stats stats{};
};

void params_defaults(llama_mtp_params & p);
llama_mtp_status read_params(llama_context * ctx_tgt, const llama_mtp_params * params,
                             llama_mtp_params & p, const std::string & where);
llama_mtp_status read_strategies(const llama_mtp_params & p, std::vector<llama_mtp_strategy> & list,
                                 int32_t & draft_type, const std::string & where);
llama_mtp_status check_models(llama_context * ctx_tgt, const llama_mtp_params & p,
                              int32_t draft_type, const std::string & where);

}  // namespace llama_mtp_impl

struct llama_mtp {
    llama_context * ctx_tgt = nullptr;
    llama_context * ctx_dft = nullptr;  // the draft-context strategy's context, if any
    std::vector<llama_mtp_impl::strategy_slot> slots;  // in upstream's order of preference
    bool has_mtp = false;
    llama_mtp_params params{};
    std::vector<llama_mtp_impl::seq_state> seqs;
    std::unique_ptr<llama_mtp_upstream::batch> batch_tgt;  // used by llama_mtp_step
    std::vector<llama_token_data> candidates;  // llama_mtp_step's sampling buffer
    int32_t n_vocab = 0;
    llama_mtp_stats stats{};
    std::vector<int32_t> captured_layers;  // target layers whose inputs the draft reads
    bool reads_final_states = false;       // EAGLE-3 reads the target's final hidden states
    bool defers_last_row = false;          // EAGLE-3 writes a batch's last row with the next

    ~llama_mtp();
};

namespace llama_mtp_impl {

llama_mtp_status build_sidecar(llama_mtp & sidecar, const std::vector<llama_mtp_strategy> & list,
                               int32_t draft_type, const std::string & where);
llama_mtp_status check_seq(const llama_mtp * mtp, llama_seq_id seq_id);
llama_mtp_status check_token(const llama_mtp * mtp, llama_token token, const std::string & what);
llama_mtp_status check_next_pos(const llama_mtp * mtp, llama_seq_id seq_id, llama_pos pos,
                                const std::string & what);
void remove_range(llama_mtp * mtp, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
llama_mtp_status sample_row(llama_mtp * mtp, llama_sampler * smpl, int32_t idx, llama_token & out);
llama_mtp_status preflight_sampler(llama_mtp * mtp, llama_seq_id seq_id, llama_sampler * smpl);
llama_mtp_status do_draft(llama_mtp * mtp, llama_seq_id seq_id, llama_token id_last,
                          llama_pos pos0, int32_t n_max);
llama_mtp_status do_accept(llama_mtp * mtp, llama_seq_id seq_id, int32_t n_accepted,
                           const char * where, bool count_step = true);
// Feed a batch just decoded on the target to every strategy; marks drafted sequences verified.
llama_mtp_status mirror(llama_mtp * mtp, const llama_mtp_upstream::batch & batch);
// llama_mtp_step (one item, `where` its name) and llama_mtp_step_many: every item's draft, one
// target decode of all their rows, one mirror, then each item's sampling, accept and rollback.
// Items arrive with struct_size checked and outputs zeroed; returns OK or the first failure's.
llama_mtp_status run_steps(llama_mtp * mtp, const std::vector<llama_mtp_step_item *> & items,
                           const std::string & where);
// Whether run_steps verifies all its items in one decode (else one decode each: a draft that
// reads the target's layers).
bool verifies_together(const llama_mtp * mtp);

}  // namespace llama_mtp_impl
