// llama.cpp internals, one variant per probe (see llama_mtp_upstream.h and the probes in
// CMakeLists.txt). The only file of the wrapper that includes common/ and src/ headers.

#include "llama_mtp_upstream.h"
#include "llama_mtp.h"

#include "common.h"
#include "ngram-cache.h"  // LLAMA_NGRAM_MAX: the n-gram cache file's record layout
#include "speculative.h"

#include "llama-ext.h"  // the target's hidden-state rows (staging API)

#include "ggml-backend.h"  // ggml_backend_tensor_get: a draft's d2t values

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utility>

// Every probe result comes from CMake; a build that skipped the probes must not guess.
#if !defined(LLAMA_MTP_UP_COMMON_BATCH) || !defined(LLAMA_MTP_UP_PROCESS_API) ||              \
    !defined(LLAMA_MTP_UP_DRAFT_POS0) || !defined(LLAMA_MTP_UP_EMBD_NEXTN) ||                  \
    !defined(LLAMA_MTP_UP_N_LAYER_NEXTN) || !defined(LLAMA_MTP_UP_CTX_OTHER) ||                \
    !defined(LLAMA_MTP_UP_N_OUTPUTS_MAX) || !defined(LLAMA_MTP_UP_DRAFT_BACKEND_SAMPLING) ||   \
    !defined(LLAMA_MTP_UP_BATCH_EMBD) || !defined(LLAMA_MTP_UP_LAYER_DRAFTS) ||                  \
    !defined(LLAMA_MTP_UP_DFLASH_SELECTOR) || !defined(LLAMA_MTP_UP_OUTPUTS_PER_SEQ)
#    error "llama_mtp_upstream.cpp is built by the wrapper's CMake project, which probes the tree"
#endif

#if LLAMA_MTP_UP_N_OUTPUTS_MAX
#    include "llama-context.h"  // llama_context::get_cparams (exported from ELF/Mach-O libllama only)
#endif

// Exported by libllama (src/llama-model.h, "for internal test use"): the model's loaded tensors.
// Tensors skipped at load time (the NextN block when load_mtp = false) are not in it.
const std::vector<std::pair<std::string, ggml_tensor *>> & llama_internal_get_tensor_map(
    const llama_model * model);

namespace llama_mtp_upstream {

// ---- batches ------------------------------------------------------------------------------------

#if LLAMA_MTP_UP_COMMON_BATCH
// common_batch (later trees): what common_speculative_process and llama_process take.
struct batch::native {
    explicit native(llama_context * ctx) : value(ctx) {}
    common_batch value;
};

static void fill(batch::native & n, const std::vector<batch::entry> & entries) {
    n.value.clear();
    for (const auto & e : entries) {
#    if LLAMA_MTP_UP_BATCH_EMBD
        if (e.token == LLAMA_TOKEN_NULL) {
            n.value.add_embd(llama_embd{e.embd, 1, (size_t) e.n_embd}, e.pos, e.seq_id, e.output);
            continue;
        }
#    endif
        n.value.add(e.token, e.pos[0], e.seq_id, e.output);
    }
}
#else
// llama_batch (earlier trees).
struct batch::native {
    explicit native(llama_context *) {}
    ~native() {
        if (capacity > 0) {
            llama_batch_free(value);
        }
    }
    llama_batch value{};
    int32_t capacity = 0;
};

static void fill(batch::native & n, const std::vector<batch::entry> & entries) {
    const int32_t size = (int32_t) entries.size();
    if (size > n.capacity) {
        if (n.capacity > 0) {
            llama_batch_free(n.value);
        }
        n.value = llama_batch_init(size, 0, 1);
        n.capacity = size;
    }
    n.value.n_tokens = size;
    for (int32_t i = 0; i < size; ++i) {
        const auto & e = entries[(size_t) i];
        n.value.token[i] = e.token;
        n.value.pos[i] = e.pos[0];
        n.value.n_seq_id[i] = 1;
        n.value.seq_id[i][0] = e.seq_id;
        n.value.logits[i] = e.output ? 1 : 0;
    }
}
#endif

batch::batch() = default;

batch::~batch() {
    delete native_;
}

batch::native & batch::rendered(llama_context * ctx) const {
    if (native_ == nullptr) {
        native_ = new native(ctx);
    }
    if (stale_) {
        fill(*native_, entries_);
        stale_ = false;
    }
    return *native_;
}

int32_t decode(llama_context * ctx, const batch & b) {
#if LLAMA_MTP_UP_PROCESS_API
    return llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, b.rendered(ctx).value.get());
#else
    return llama_decode(ctx, b.rendered(ctx).value);
#endif
}

// ---- speculative decoding -----------------------------------------------------------------------

struct speculative {
    common_speculative * spec = nullptr;
};

speculative_defaults defaults() {
    const common_params_speculative up;
    speculative_defaults d{};
    const common_params_speculative_ngram_map * maps[3] = {&up.ngram_simple, &up.ngram_map_k,
                                                           &up.ngram_map_k4v};
    for (int i = 0; i < 3; ++i) {
        d.map_size_n[i] = maps[i]->size_n;
        d.map_size_m[i] = maps[i]->size_m;
        d.map_min_hits[i] = maps[i]->min_hits;
    }
    d.mod_n_match = up.ngram_mod.n_match;
    d.mod_n_min = up.ngram_mod.n_min;
    d.mod_n_max = up.ngram_mod.n_max;
#if LLAMA_MTP_UP_DRAFT_BACKEND_SAMPLING
    d.backend_sampling = up.draft.backend_sampling;
#else
    d.backend_sampling = false;
#endif
    return d;
}

bool has_backend_sampling() {
    return LLAMA_MTP_UP_DRAFT_BACKEND_SAMPLING != 0;
}

int32_t upstream_strategy_type(int32_t type) {
    switch (type) {
        case LLAMA_MTP_STRATEGY_DRAFT_MTP:     return COMMON_SPECULATIVE_TYPE_DRAFT_MTP;
#if LLAMA_MTP_UP_HAVE_DRAFT_SIMPLE
        case LLAMA_MTP_STRATEGY_DRAFT_SIMPLE:  return COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE;
#endif
#if LLAMA_MTP_UP_HAVE_NGRAM_SIMPLE
        case LLAMA_MTP_STRATEGY_NGRAM_SIMPLE:  return COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE;
#endif
#if LLAMA_MTP_UP_HAVE_NGRAM_MAP_K
        case LLAMA_MTP_STRATEGY_NGRAM_MAP_K:   return COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K;
#endif
#if LLAMA_MTP_UP_HAVE_NGRAM_MAP_K4V
        case LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V: return COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K4V;
#endif
#if LLAMA_MTP_UP_HAVE_NGRAM_MOD
        case LLAMA_MTP_STRATEGY_NGRAM_MOD:     return COMMON_SPECULATIVE_TYPE_NGRAM_MOD;
#endif
#if LLAMA_MTP_UP_HAVE_NGRAM_CACHE
        case LLAMA_MTP_STRATEGY_NGRAM_CACHE:   return COMMON_SPECULATIVE_TYPE_NGRAM_CACHE;
#endif
#if LLAMA_MTP_UP_HAVE_DRAFT_EAGLE3
        case LLAMA_MTP_STRATEGY_DRAFT_EAGLE3:  return COMMON_SPECULATIVE_TYPE_DRAFT_EAGLE3;
#endif
#if LLAMA_MTP_UP_HAVE_DRAFT_DFLASH
        case LLAMA_MTP_STRATEGY_DRAFT_DFLASH:  return COMMON_SPECULATIVE_TYPE_DRAFT_DFLASH;
#endif
#if LLAMA_MTP_UP_HAVE_DRAFT_DSPARK
        case LLAMA_MTP_STRATEGY_DRAFT_DSPARK:  return COMMON_SPECULATIVE_TYPE_DRAFT_DSPARK;
#endif
        default:                               return -1;
    }
}

speculative * init(const strategy_config & c, uint32_t n_seq) {
    common_params_speculative sp;
    sp.types = {(common_speculative_type) c.upstream_type};
    sp.draft.n_max = c.n_max;
    sp.draft.n_min = c.n_min;
    sp.draft.p_min = c.p_min;
#if LLAMA_MTP_UP_DRAFT_BACKEND_SAMPLING
    sp.draft.backend_sampling = c.backend_sampling;
#endif
    sp.draft.ctx_tgt = c.ctx_tgt;
    sp.draft.ctx_dft = c.ctx_dft;
#if LLAMA_MTP_UP_HAVE_DRAFT_SIMPLE
    if (c.upstream_type == COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE) {
        // Early trees (b9246 ... b9341) enable draft-simple only when a draft model path is
        // configured, although the implementation uses the context it is given; the caller
        // loaded the model, so the path only says that there is one. Later trees ignore it here.
        sp.draft.mparams.path = "(draft model loaded by the caller)";
    }
#endif
    common_params_speculative_ngram_map map;
    map.size_n = (uint16_t) c.size_n;
    map.size_m = (uint16_t) c.size_m;
    map.min_hits = (uint16_t) c.min_hits;
    sp.ngram_simple = map;
    sp.ngram_map_k = map;
    sp.ngram_map_k4v = map;
    sp.ngram_mod.n_match = c.n_match;
    sp.ngram_mod.n_min = c.mod_n_min;
    sp.ngram_mod.n_max = c.mod_n_max;
    sp.ngram_cache.lookup_cache_static = c.cache_static;
    sp.ngram_cache.lookup_cache_dynamic = c.cache_dynamic;
    common_speculative * spec = common_speculative_init(sp, n_seq);
    if (spec == nullptr) {
        return nullptr;
    }
    return new speculative{spec};
}

void release(speculative * spec) {
    if (spec != nullptr) {
        common_speculative_free(spec->spec);
        delete spec;
    }
}

void begin(speculative * spec, llama_seq_id seq_id, const token_list & prompt) {
    common_speculative_begin(spec->spec, seq_id, prompt);
}

void draft(speculative * spec, llama_seq_id seq_id, llama_token id_last, llama_pos pos0,
           int32_t n_max, const token_list * prompt, token_list * result) {
    auto & dp = common_speculative_get_draft_params(spec->spec, seq_id);
    dp.drafting = true;
    dp.n_max = n_max;
#if LLAMA_MTP_UP_DRAFT_POS0
    dp.pos0 = pos0;
#else
    dp.n_past = pos0;
#endif
    dp.id_last = id_last;
    dp.prompt = prompt;
    dp.result = result;
    common_speculative_draft(spec->spec);
    dp.drafting = false;
}

bool batch_takes_embeddings() {
    return LLAMA_MTP_UP_BATCH_EMBD != 0;
}

bool process(speculative * spec, const batch & b, llama_context * ctx_tgt) {
    return common_speculative_process(spec->spec, b.rendered(ctx_tgt).value);
}

void accept(speculative * spec, llama_seq_id seq_id, uint16_t n_accepted) {
    common_speculative_accept(spec->spec, seq_id, n_accepted);
}

// ---- hidden states, NextN layers, context internals ---------------------------------------------

bool target_has_rows(llama_context * ctx_tgt, int32_t n_rows) {
#if LLAMA_MTP_UP_EMBD_NEXTN
    return llama_get_embeddings_nextn(ctx_tgt) != nullptr &&
           llama_get_embeddings_nextn_ith(ctx_tgt, n_rows - 1) != nullptr;
#else
    return llama_get_embeddings_pre_norm(ctx_tgt) != nullptr &&
           llama_get_embeddings_pre_norm_ith(ctx_tgt, n_rows - 1) != nullptr;
#endif
}

int32_t n_nextn_layers(const llama_model * model) {
#if LLAMA_MTP_UP_N_LAYER_NEXTN
    return llama_model_n_layer_nextn(model);
#else
    // Before llama_model_n_layer_nextn: the GGUF key "<arch>.nextn_predict_layers" (0 if absent).
    char arch[128] = {0};
    if (llama_model_meta_val_str(model, "general.architecture", arch, sizeof(arch)) <= 0) {
        return 0;
    }
    const std::string key = std::string(arch) + ".nextn_predict_layers";
    char value[32] = {0};
    if (llama_model_meta_val_str(model, key.c_str(), value, sizeof(value)) <= 0) {
        return 0;
    }
    return (int32_t) std::strtol(value, nullptr, 10);
#endif
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

bool n_outputs_max(llama_context * ctx, uint32_t & out) {
#if LLAMA_MTP_UP_N_OUTPUTS_MAX
    out = ctx->get_cparams().n_outputs_max;
    return true;
#else
    (void) ctx;
    out = 0;
    return false;
#endif
}

void mtp_context_params(llama_context_params & cparams, llama_context * ctx_tgt) {
    cparams.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
#if LLAMA_MTP_UP_CTX_OTHER
    cparams.ctx_other = ctx_tgt;
#else
    (void) ctx_tgt;
#endif
}

int32_t ngram_cache_key_length() {
    return LLAMA_NGRAM_MAX;
}

// ---- drafts that read the target's layers ---------------------------------------------------------

bool has_layer_drafts() {
    return LLAMA_MTP_UP_LAYER_DRAFTS != 0;
}

std::vector<int32_t> target_layer_ids(const llama_model * draft) {
#if LLAMA_MTP_UP_LAYER_DRAFTS
    const int32_t * ids = llama_model_target_layer_ids(draft);
    const uint32_t n = llama_model_target_layer_ids_n(draft);
    if (ids == nullptr) {
        return {};
    }
    return std::vector<int32_t>(ids, ids + n);
#else
    (void) draft;
    return {};
#endif
}

int32_t dflash_selector_top_k(const llama_model * draft) {
#if LLAMA_MTP_UP_DFLASH_SELECTOR
    return llama_model_dflash_selector_top_k(draft);
#else
    (void) draft;
    return 0;
#endif
}

static const ggml_tensor * loaded_tensor(const llama_model * model, const char * name) {
    for (const auto & entry : llama_internal_get_tensor_map(model)) {
        if (entry.second != nullptr && entry.first == name) {
            return entry.second;
        }
    }
    return nullptr;
}

bool find_tensor(const llama_model * model, const char * name, tensor_shape & out) {
    const ggml_tensor * t = loaded_tensor(model, name);
    if (t == nullptr) {
        return false;
    }
    for (int i = 0; i < 4; ++i) {
        out.ne[i] = t->ne[i];
    }
    out.type = (int32_t) t->type;
    return true;
}

bool read_i64_tensor(const llama_model * model, const char * name, std::vector<int64_t> & out) {
    const ggml_tensor * t = loaded_tensor(model, name);
    if (t == nullptr || t->type != GGML_TYPE_I64 || t->buffer == nullptr) {
        return false;
    }
    out.resize((size_t) ggml_nelements(t));
    ggml_backend_tensor_get(t, out.data(), 0, out.size() * sizeof(int64_t));
    return true;
}

void layer_draft_context_params(llama_context_params & cparams, llama_context * ctx_tgt,
                                uint32_t outputs_per_seq) {
#if LLAMA_MTP_UP_LAYER_DRAFTS
    cparams.ctx_other = ctx_tgt;
#else
    (void) ctx_tgt;
#endif
#if LLAMA_MTP_UP_OUTPUTS_PER_SEQ
    // a DFlash/DSpark block samples every position on the backend (common/speculative.cpp sets
    // the same for those strategies)
    // (0 means "as many as the batch / as n_outputs_max": left as is)
    if (cparams.n_outputs_max != 0) {
        cparams.n_outputs_max = std::max(cparams.n_outputs_max, cparams.n_seq_max * outputs_per_seq);
    }
    if (cparams.n_outputs_max_per_seq != 0) {
        cparams.n_outputs_max_per_seq = std::max(cparams.n_outputs_max_per_seq, outputs_per_seq);
    }
#else
    (void) cparams;
    (void) outputs_per_seq;
#endif
}

void stop_layer_capture(llama_context * ctx_tgt, const std::vector<int32_t> & layers) {
#if LLAMA_MTP_UP_LAYER_DRAFTS
    for (const int32_t id : layers) {
        llama_set_embeddings_layer_inp(ctx_tgt, (uint32_t) id, false);
    }
#else
    (void) ctx_tgt;
    (void) layers;
#endif
}

bool target_has_final_states(llama_context * ctx_tgt) {
#if LLAMA_MTP_UP_EMBD_NEXTN
    return llama_get_embeddings_nextn(ctx_tgt) != nullptr;
#else
    (void) ctx_tgt;
    return false;
#endif
}

}  // namespace llama_mtp_upstream
