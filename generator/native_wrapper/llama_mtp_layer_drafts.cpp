// The checks of an EAGLE-3, DFlash or DSpark draft against its target (see llama_mtp_layer_drafts.h).
// Each check stands before a failure upstream would have: a GGML_ASSERT/GGML_ABORT in
// common/speculative.cpp, src/models/eagle3.cpp, src/models/dflash.cpp or llama-context.cpp, or a
// ggml shape assert when the draft uses the target's tensors.

#include "llama_mtp_layer_drafts.h"

#include "llama_mtp_strategies.h"
#include "llama_mtp_upstream.h"

#include <cstdlib>
#include <string>

#ifndef LLAMA_MTP_LLAMA_TAG
#    define LLAMA_MTP_LLAMA_TAG "unknown tag"
#endif
// Architectures whose graph exports the input of each layer (res->t_layer_inp[il]), and those
// that also export the input after the last layer (t_layer_inp[n_layer]), comma-separated; the
// build reads them from the tree's src/models/ (generator/native/nextn_archs.py).
#ifndef LLAMA_MTP_LAYER_INPUT_ARCHS
#    define LLAMA_MTP_LAYER_INPUT_ARCHS ""
#endif
#ifndef LLAMA_MTP_FINAL_INPUT_ARCHS
#    define LLAMA_MTP_FINAL_INPUT_ARCHS ""
#endif

namespace up = llama_mtp_upstream;

namespace llama_mtp_impl {

namespace {

constexpr int32_t k_dflash_default_block = 16;  // common/speculative.cpp, without dflash.block_size

std::string meta(const llama_model * model, const std::string & key, bool & found) {
    char value[256] = {0};
    found = llama_model_meta_val_str(model, key.c_str(), value, sizeof(value)) >= 0;
    return found ? std::string(value) : std::string();
}

int64_t meta_int(const llama_model * model, const std::string & key, int64_t fallback) {
    bool found = false;
    const std::string text = meta(model, key, found);
    if (!found) {
        return fallback;
    }
    char * end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    return end != text.c_str() && *end == '\0' ? (int64_t) v : -1;
}

std::string architecture(const llama_model * model) {
    bool found = false;
    const std::string arch = meta(model, "general.architecture", found);
    return found ? arch : std::string("(none)");
}

struct pair_check {
    const llama_model * tgt;
    const llama_model * dft;
    int32_t type;
    std::string what;  // "llama_mtp_create: draft-eagle3 draft"

    bool eagle3() const { return type == LLAMA_MTP_STRATEGY_DRAFT_EAGLE3; }
    bool dspark() const { return type == LLAMA_MTP_STRATEGY_DRAFT_DSPARK; }
    llama_mtp_status mismatch(const std::string & why) const {
        return fail(LLAMA_MTP_STATUS_DRAFT_MISMATCH, what + ": " + why);
    }

    llama_mtp_status kind() const;
    llama_mtp_status layers() const;
    llama_mtp_status widths() const;
    llama_mtp_status shared_tensors() const;
    llama_mtp_status block(const llama_mtp_params & p) const;
};

// The architecture the strategy reads, and kinds the wrapper does not run yet.
llama_mtp_status pair_check::kind() const {
    const std::string want = eagle3() ? "eagle3" : "dflash";
    const std::string arch = architecture(dft);
    if (arch != want) {
        return mismatch("it is a '" + arch + "' model, not a '" + want +
                        "' one (general.architecture)");
    }
    if (eagle3()) {
        return LLAMA_MTP_STATUS_OK;
    }
    if (up::dflash_selector_top_k(dft) > 0 || meta_int(dft, "dflash.hyper_connection.count", 0) > 0) {
        return fail(LLAMA_MTP_STATUS_UNSUPPORTED_STRATEGY,
                    what + ": a DFlash2 (selector heads) or DeepSeek-V4 draft; the wrapper does "
                           "not run those yet (no test draft of either kind)");
    }
    up::tensor_shape markov{};
    const bool has_markov = up::find_tensor(dft, "markov_w1.weight", markov);
    if (dspark() != has_markov) {
        const int32_t other = dspark() ? LLAMA_MTP_STRATEGY_DRAFT_DFLASH : LLAMA_MTP_STRATEGY_DRAFT_DSPARK;
        return mismatch(std::string(has_markov ? "it has a" : "it has no") +
                        " Markov head (markov_w1.weight): run it with " + find_strategy(other)->name);
    }
    return LLAMA_MTP_STATUS_OK;
}

// Target layer ids: how many, in range, and exported by the target's architecture.
llama_mtp_status pair_check::layers() const {
    const std::vector<int32_t> ids = up::target_layer_ids(dft);
    if (eagle3() ? ids.size() != 3 : ids.empty()) {
        return mismatch("it lists " + std::to_string(ids.size()) + " target layers (" +
                        (eagle3() ? "EAGLE-3 reads exactly 3" : "DFlash reads at least 1") + ")");
    }
    const int32_t n_layer = llama_model_n_layer(tgt);
    const std::string arch = architecture(tgt);
    for (const int32_t id : ids) {
        if (id < 0 || id > n_layer) {
            return mismatch("target layer " + std::to_string(id) + " is outside [0, " +
                            std::to_string(n_layer) + "]: the target has " +
                            std::to_string(n_layer) + " layers");
        }
        if (id == n_layer && !eagle3() && !in_list(LLAMA_MTP_FINAL_INPUT_ARCHS, arch)) {
            return mismatch("target layer " + std::to_string(id) +
                            " (past the last layer) is exported by llama.cpp " + LLAMA_MTP_LLAMA_TAG +
                            " only for the architectures '" + LLAMA_MTP_FINAL_INPUT_ARCHS +
                            "', not for '" + arch + "'");
        }
        if (id < n_layer && !in_list(LLAMA_MTP_LAYER_INPUT_ARCHS, arch)) {
            return mismatch("the target's architecture '" + arch + "' does not export its layer "
                            "inputs in llama.cpp " + LLAMA_MTP_LLAMA_TAG +
                            " (llama.cpp would abort at its next decode); architectures that do: " +
                            LLAMA_MTP_LAYER_INPUT_ARCHS);
        }
    }
    if (eagle3() && llama_model_n_layer(dft) != 1) {
        return mismatch("it has " + std::to_string(llama_model_n_layer(dft)) +
                        " blocks; EAGLE-3's graph takes exactly 1");
    }
    return LLAMA_MTP_STATUS_OK;
}

// The target's width where the draft reads it, and attention heads the graph can build.
llama_mtp_status pair_check::widths() const {
    const int32_t n_tgt = llama_model_n_embd(tgt);
    const int32_t n_dft = llama_model_n_embd(dft);
    if (eagle3()) {
        const int64_t hidden = meta_int(dft, "eagle3.target_hidden_size", -1);
        if (hidden != n_tgt) {
            return mismatch("eagle3.target_hidden_size is " + std::to_string(hidden) +
                            ", the target's width is " + std::to_string(n_tgt));
        }
    } else if (n_dft != n_tgt) {
        return mismatch("its width is " + std::to_string(n_dft) + ", the target's " +
                        std::to_string(n_tgt) + " (DFlash reads target rows at its own width)");
    }
    const std::string arch = architecture(dft);
    const int32_t n_head = llama_model_n_head(dft);
    const int64_t head = n_head > 0 ? n_dft / n_head : 0;
    const int64_t k = meta_int(dft, arch + ".attention.key_length", head);
    const int64_t v = meta_int(dft, arch + ".attention.value_length", head);
    if (k != v) {
        return mismatch("its key length " + std::to_string(k) + " is not its value length " +
                        std::to_string(v));
    }
    return LLAMA_MTP_STATUS_OK;
}

// Token embeddings and output head the draft lacks are the target's: they must exist there at the
// draft's width; a d2t map must fit the output's rows and the vocabulary.
llama_mtp_status pair_check::shared_tensors() const {
    const int32_t n_dft = llama_model_n_embd(dft);
    int64_t output_rows = 0;
    for (const char * name : {"token_embd.weight", "output.weight"}) {
        up::tensor_shape own{}, theirs{};
        if (up::find_tensor(dft, name, own)) {
            output_rows = own.ne[1];
            continue;
        }
        if (!up::find_tensor(tgt, name, theirs)) {
            return mismatch(std::string("it has no ") + name + " of its own and the target has "
                            "none to share (a target with tied embeddings has no output.weight)");
        }
        if (theirs.ne[0] != n_dft) {
            return mismatch(std::string("the target's ") + name + " is " +
                            std::to_string(theirs.ne[0]) + " wide, the draft is " +
                            std::to_string(n_dft));
        }
        output_rows = theirs.ne[1];
    }
    up::tensor_shape d2t{};
    if (!up::find_tensor(dft, "d2t", d2t)) {
        return LLAMA_MTP_STATUS_OK;
    }
    std::vector<int64_t> map;
    if (!up::read_i64_tensor(dft, "d2t", map) || d2t.ne[0] != output_rows) {
        return mismatch("its d2t map is not an I64 vector of " + std::to_string(output_rows) +
                        " entries (the output head's rows)");
    }
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(tgt));
    for (const int64_t t : map) {
        if (t < 0 || t >= n_vocab) {
            return mismatch("its d2t map holds token " + std::to_string(t) +
                            ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
        }
    }
    return LLAMA_MTP_STATUS_OK;
}

// DFlash/DSpark: the mask token that fills a block, the block size, DSpark's confidence head.
llama_mtp_status pair_check::block(const llama_mtp_params & p) const {
    if (eagle3()) {
        return LLAMA_MTP_STATUS_OK;
    }
    const llama_vocab * vocab = llama_model_get_vocab(dft);
    const llama_token mask = llama_vocab_mask(vocab);
    if (mask < 0 || mask >= llama_vocab_n_tokens(vocab)) {
        return mismatch("it has no mask token (tokenizer.ggml.mask_token_id), which fills its "
                        "draft block");
    }
    const int64_t size = meta_int(dft, "dflash.block_size", dspark() ? -1 : k_dflash_default_block);
    if (dspark() ? size < 1 : size < 2) {
        return mismatch("dflash.block_size is " + (size < 0 ? std::string("missing or not a number")
                                                             : std::to_string(size)) +
                        (dspark() ? " (DSpark's graph needs one >= 1)"
                                  : " (DFlash drafts block_size - 1 tokens: it needs >= 2)"));
    }
    if (dspark() && p.p_min > 0.0f) {
        up::tensor_shape conf{};
        bool found = false;
        const std::string flag = meta(dft, "dflash.has_confidence_head", found);
        if (!up::find_tensor(dft, "conf_proj.weight", conf) || (found && flag != "true")) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        what + ": p_min > 0 stops DSpark drafts by their confidence, and this "
                               "draft has no confidence head (conf_proj); set p_min = 0");
        }
    }
    return LLAMA_MTP_STATUS_OK;
}

}  // namespace

llama_mtp_status check_layer_draft(llama_context * ctx_tgt, const llama_mtp_params & p,
                                   int32_t type, const std::string & where) {
    const pair_check c{llama_get_model(ctx_tgt), p.draft_model, type,
                       where + ": the " + find_strategy(type)->name + " draft"};
    const int32_t n_tgt = llama_vocab_n_tokens(llama_model_get_vocab(c.tgt));
    const int32_t n_dft = llama_vocab_n_tokens(llama_model_get_vocab(c.dft));
    llama_mtp_status st = c.kind();
    if (st == LLAMA_MTP_STATUS_OK && n_tgt != n_dft) {
        return fail(LLAMA_MTP_STATUS_VOCAB_MISMATCH,
                    c.what + ": it has " + std::to_string(n_dft) + " tokens, the target " +
                        std::to_string(n_tgt) + " (this draft reads the target's token ids as its own)");
    }
    if (st == LLAMA_MTP_STATUS_OK) st = c.layers();
    if (st == LLAMA_MTP_STATUS_OK) st = c.widths();
    if (st == LLAMA_MTP_STATUS_OK) st = c.shared_tensors();
    if (st == LLAMA_MTP_STATUS_OK) st = c.block(p);
    return st;
}

std::vector<int32_t> captured_layers(const llama_model * target, const llama_model * draft,
                                     int32_t type) {
    std::vector<int32_t> layers;
    const int32_t n_layer = llama_model_n_layer(target);
    for (const int32_t id : up::target_layer_ids(draft)) {
        if (id < n_layer || type != LLAMA_MTP_STRATEGY_DRAFT_EAGLE3) {
            layers.push_back(id);
        }
    }
    return layers;
}

bool reads_final_states(const llama_model * target, const llama_model * draft, int32_t type) {
    if (type != LLAMA_MTP_STRATEGY_DRAFT_EAGLE3) {
        return false;
    }
    for (const int32_t id : up::target_layer_ids(draft)) {
        if (id == llama_model_n_layer(target)) {
            return true;
        }
    }
    return false;
}

}  // namespace llama_mtp_impl
