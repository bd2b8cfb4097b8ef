// The wrapper's one door to llama.cpp internals.
//
// Everything the wrapper needs from outside llama.h's stable part goes through here: common/'s
// speculative decoding (its parameters, draft slots, batch type), the llama-ext staging API (the
// target's hidden-state rows), llama_context internals, the NextN accessors and the decode entry
// point. Upstream moves these from tag to tag; llama_mtp_upstream.cpp is the only file that
// includes common/ or src/ headers, and it picks each variant by the configure-time probes of the
// wrapper's CMake project (LLAMA_MTP_UP_* macros: compile checks of the tree, not version
// numbers). The rest of the wrapper (the strategy table, the sidecar logic, the C ABI) sees only
// the declarations below, which are the same for every tag.

#pragma once

#include "llama.h"
#include "llama_mtp.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llama_mtp_upstream {

using token_list = std::vector<llama_token>;

// A token batch in the wrapper's own terms; turned into whatever batch type the tree's decode
// and speculative entry points take.
class batch {
  public:
    // A token, or (token LLAMA_TOKEN_NULL) one embedding row of n_embd floats at embd, which
    // the caller keeps alive while the batch is used. pos[0] is the position; pos[1..] the
    // further M-RoPE sections of an embedding row (0 for tokens).
    struct entry {
        llama_token   token;
        llama_pos     pos[LLAMA_MTP_MAX_POS_PER_ROW];
        llama_seq_id  seq_id;
        bool          output;
        const float * embd;
        int32_t       n_embd;
    };

    batch();
    ~batch();
    batch(const batch &) = delete;
    batch & operator=(const batch &) = delete;

    void clear() {
        entries_.clear();
        stale_ = true;
    }
    void add(llama_token token, llama_pos pos, llama_seq_id seq_id, bool output) {
        entries_.push_back(entry{token, {pos, 0, 0, 0}, seq_id, output, nullptr, 0});
        stale_ = true;
    }
    // One embedding row; pos holds n_pos (1..LLAMA_MTP_MAX_POS_PER_ROW) sections.
    void add_embd(const float * embd, int32_t n_embd, const llama_pos * pos, int32_t n_pos,
                  llama_seq_id seq_id) {
        entry e{LLAMA_TOKEN_NULL, {0, 0, 0, 0}, seq_id, false, embd, n_embd};
        for (int32_t j = 0; j < n_pos && j < LLAMA_MTP_MAX_POS_PER_ROW; ++j) {
            e.pos[j] = pos[j];
        }
        entries_.push_back(e);
        stale_ = true;
    }
    const std::vector<entry> & entries() const { return entries_; }

    struct native;  // the tree's batch object, built on demand

    // The tree's batch for these entries, filled again only after they changed (a step decodes
    // one batch and mirrors it to every strategy).
    native & rendered(llama_context * ctx) const;

  private:
    std::vector<entry> entries_;
    mutable native * native_ = nullptr;
    mutable bool stale_ = true;
};

// Decode a batch on a context (llama_process or llama_decode, as the tree has). 0 on success.
int32_t decode(llama_context * ctx, const batch & b);

// ---- speculative decoding (common/speculative) --------------------------------------------------

struct speculative;  // one common_speculative

// What one strategy is initialised with, in the wrapper's terms.
struct strategy_config {
    int32_t upstream_type = 0;  // from upstream_strategy_type()
    int32_t n_max = LLAMA_MTP_DRAFT_DEFAULT;
    int32_t n_min = 0;
    float   p_min = 0.0f;
    bool    backend_sampling = false;
    llama_context * ctx_tgt = nullptr;
    llama_context * ctx_dft = nullptr;
    int32_t size_n = 0, size_m = 0, min_hits = 0;  // n-gram map strategies
    int32_t n_match = 0, mod_n_min = 0, mod_n_max = 0;  // ngram-mod
    std::string cache_static, cache_dynamic;  // ngram-cache
};

// llama.cpp's own defaults for this tree (a default-constructed common_params_speculative).
struct speculative_defaults {
    int32_t map_size_n[3], map_size_m[3], map_min_hits[3];  // ngram-simple, ngram-map-k, -k4v
    int32_t mod_n_match, mod_n_min, mod_n_max;
    bool    backend_sampling;
};
speculative_defaults defaults();

// The upstream enum value for a llama_mtp_strategy_type, or -1 when this tree lacks it.
int32_t upstream_strategy_type(int32_t llama_mtp_type);

// Whether common_params_speculative has draft.backend_sampling in this tree.
bool has_backend_sampling();

speculative * init(const strategy_config & config, uint32_t n_seq);
void release(speculative * spec);
void begin(speculative * spec, llama_seq_id seq_id, const token_list & prompt);
// Fill the sequence's draft slot and ask for a draft; `result` receives it.
void draft(speculative * spec, llama_seq_id seq_id, llama_token id_last, llama_pos pos0,
           int32_t n_max, const token_list * prompt, token_list * result);
// Whether this tree's speculative batches take embedding rows (batch::add_embd entries).
bool batch_takes_embeddings();
// Mirror a batch just decoded on the target. False when the draft context's decode failed.
bool process(speculative * spec, const batch & b, llama_context * ctx_tgt);
void accept(speculative * spec, llama_seq_id seq_id, uint16_t n_accepted);

// ---- the target's hidden states and the model's NextN layers --------------------------------

// The target's last decode kept hidden-state rows 0..n_rows-1 for the MTP head.
bool target_has_rows(llama_context * ctx_tgt, int32_t n_rows);
// NextN layers the model declares (llama_model_n_layer_nextn, or its GGUF key in older trees).
int32_t n_nextn_layers(const llama_model * model);
// The model's NextN tensors were loaded (they are absent when loaded with load_mtp = false).
bool has_nextn_tensors(const llama_model * model);
// The target's n_outputs_max, when this tree has it and it is readable on this platform.
bool n_outputs_max(llama_context * ctx, uint32_t & out);
// Context parameters for an MTP context beside ctx_tgt (ctx_type, and ctx_other where it exists).
void mtp_context_params(llama_context_params & cparams, llama_context * ctx_tgt);

// Tokens per n-gram key in an n-gram cache file (LLAMA_NGRAM_MAX).
int32_t ngram_cache_key_length();

// ---- drafts that read the target's layers (EAGLE-3, DFlash, DSpark) ----------------------------

// Whether this tree has what those drafts need from outside llama.h: the draft's target layer ids,
// the capture of the target's layer inputs and a draft context sharing the target's tensors.
bool has_layer_drafts();
// The draft model's target layer ids (its GGUF `<arch>.target_layers`); empty without them.
std::vector<int32_t> target_layer_ids(const llama_model * draft);
// A DFlash draft's selector top-k (DFlash2 drafts); 0 for others or where the tree has none.
int32_t dflash_selector_top_k(const llama_model * draft);
// One loaded tensor of a model: its shape and ggml type.
struct tensor_shape {
    int64_t ne[4];
    int32_t type;
};
// False when the model has no loaded tensor of that name.
bool find_tensor(const llama_model * model, const char * name, tensor_shape & out);
// The values of a loaded I64 tensor (a draft's d2t map); false when absent or of another type.
bool read_i64_tensor(const llama_model * model, const char * name, std::vector<int64_t> & out);
// Context parameters for such a draft: ctx_other = ctx_tgt (its missing tensors are the target's),
// and room for outputs_per_seq outputs of each sequence in one batch (a DFlash block).
void layer_draft_context_params(llama_context_params & cparams, llama_context * ctx_tgt,
                                uint32_t outputs_per_seq);
// Stop capturing the inputs of these target layers (upstream's strategies never do).
void stop_layer_capture(llama_context * ctx_tgt, const std::vector<int32_t> & layers);
// The target's last decode kept its final hidden states (EAGLE-3 reads them for a layer id equal
// to the target's layer count; upstream aborts when they are missing).
bool target_has_final_states(llama_context * ctx_tgt);

}  // namespace llama_mtp_upstream
