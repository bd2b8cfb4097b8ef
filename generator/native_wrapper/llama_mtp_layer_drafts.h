// The drafts that read the target's layers (draft-eagle3, draft-dflash, draft-dspark): the checks
// of such a draft against its target and strategy, made before llama.cpp sees the pair (upstream
// checks them with GGML_ASSERT, a process abort, or not at all). Tag-independent: llama.cpp
// internals come from llama_mtp_upstream.

#pragma once

#include "llama_mtp.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llama_mtp_impl {

// params.draft_model for `type` (one of the three) beside ctx_tgt's model: OK, or the status of
// the first thing that does not fit, with the reason (llama_mtp_last_error).
llama_mtp_status check_layer_draft(llama_context * ctx_tgt, const llama_mtp_params & p,
                                   int32_t type, const std::string & where);

// The target layers whose inputs the draft reads through llama_set_embeddings_layer_inp (for
// EAGLE-3 a layer id equal to the target's layer count is read from its final hidden states).
std::vector<int32_t> captured_layers(const llama_model * target, const llama_model * draft,
                                     int32_t type);

// Whether the draft reads the target's final hidden states (EAGLE-3, a layer id equal to the
// target's layer count).
bool reads_final_states(const llama_model * target, const llama_model * draft, int32_t type);

}  // namespace llama_mtp_impl
