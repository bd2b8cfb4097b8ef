// The strategy table: every llama_mtp_strategy_type, whether this build runs it, its llama.cpp
// defaults and the checks of its parameters. Tag-independent: what a tree lacks comes from
// llama_mtp_upstream.

#pragma once

#include "llama_mtp.h"

#include <cstdint>
#include <string>

namespace llama_mtp_impl {

// Status reporting (llama_mtp.cpp): record the message for llama_mtp_last_error.
llama_mtp_status fail(llama_mtp_status status, const std::string & message);
llama_mtp_status ok();

constexpr int32_t k_max_ngram = LLAMA_MTP_NGRAM_MAX;

// Whether `name` is one of the comma-separated names in `list` (the build's architecture lists).
bool in_list(const std::string & list, const std::string & name);

struct strategy_info {
    int32_t type;
    std::string name;  // upstream's --spec-type name, from the enumerator (llama_mtp.h's rule)
    bool draft_context;  // in LLAMA_MTP_DRAFT_CONTEXT_STRATEGIES
    bool reads_target_layers;  // its draft reads the target's layer inputs (EAGLE-3, DFlash, DSpark)
};

// In upstream's order of preference (common_speculative_init): draftless first.
const strategy_info * strategies_begin();
const strategy_info * strategies_end();
uint32_t n_strategy_types();
const strategy_info * find_strategy(int32_t type);

// OK when this build runs `type`; NOT_IN_RELEASE (the tree lacks it, or lacks what its draft
// needs) or INVALID_ARGUMENT otherwise.
llama_mtp_status strategy_support(int32_t type, const std::string & where);
void strategy_defaults(int32_t type, llama_mtp_strategy & s);
llama_mtp_status check_range(int32_t value, int32_t lo, int32_t hi, const std::string & what);
llama_mtp_status check_strategy(const llama_mtp_strategy & s, const std::string & where);

}  // namespace llama_mtp_impl
