/*
 * Drives libllama_mtp through its error cases (and, with models, a short speculative run).
 *
 *   mtp_cases                                cases that need no model
 *   mtp_cases AGREE.gguf PLAIN.gguf TWO.gguf   all cases; AGREE has one NextN layer, PLAIN none,
 *                                            TWO two (more than its architecture's graph takes)
 *   ... OTHER.gguf CACHE_OK CACHE_BAD MISSING   also the strategy cases: OTHER has another
 *                                            vocabulary; CACHE_OK is a valid n-gram cache file,
 *                                            CACHE_BAD a malformed one, MISSING does not exist
 *   mtp_cases --layer-draft NAME TARGET.gguf DRAFT.gguf STRATEGY P_MIN [run]
 *                                            one draft that reads the target's layers (draft-eagle3,
 *                                            draft-dflash, draft-dspark: STRATEGY is its name)
 *                                            against TARGET: llama_mtp_create's status as case NAME,
 *                                            and with "run" a speculative run (one process a case,
 *                                            so that an abort names its case)
 *
 * Prints one line per case:  CASE <name> <status> <message>
 * and facts as:              INFO <key> <value>
 * The Python test checks each case's status; this program only reports (a crash shows as a
 * missing line and a non-zero exit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "llama.h"
#include "llama_mtp.h"

static void report(const char * name, enum llama_mtp_status st) {
    printf("CASE %s %d %s\n", name, (int) st, st == LLAMA_MTP_STATUS_OK ? "" : llama_mtp_last_error());
    fflush(stdout);
}

static void quiet_log(enum ggml_log_level level, const char * text, void * user_data) {
    (void) level; (void) text; (void) user_data;
}

static struct llama_mtp_params default_params(void) {
    struct llama_mtp_params p;
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    llama_mtp_default_params(&p);
    return p;
}

static void no_model_cases(void) {
    printf("INFO abi_version %u\n", llama_mtp_abi_version());
    printf("INFO llama_commit %s\n", llama_mtp_llama_commit());

    struct llama_mtp_params p;
    memset(&p, 0xff, sizeof(p));
    p.struct_size = sizeof(p);
    report("default_params", llama_mtp_default_params(&p));
    printf("INFO default_n_max %d\nINFO default_n_min %d\nINFO default_p_min %g\nINFO default_n_seq %u\n",
           p.n_max, p.n_min, (double) p.p_min, p.n_seq);

    struct llama_mtp_params small;
    memset(&small, 0, sizeof(small));
    small.struct_size = 4;
    report("default_params_old_struct", llama_mtp_default_params(&small));
    report("default_params_null", llama_mtp_default_params(NULL));

    int32_t n = -1;
    report("nextn_null_model", llama_mtp_model_n_nextn_layers(NULL, &n));

    struct llama_mtp * h = (struct llama_mtp *) 0x1;
    p = default_params();
    report("create_null_context", llama_mtp_create(NULL, &p, &h));
    printf("INFO create_null_context_handle_cleared %d\n", h == NULL);
    report("create_null_out", llama_mtp_create(NULL, &p, NULL));

    llama_token toks[4] = {1, 2, 3, 4};
    int32_t nd = 0;
    struct llama_batch b = llama_batch_get_one(toks, 2);
    struct llama_mtp_stats stats;
    memset(&stats, 0, sizeof(stats));
    stats.struct_size = sizeof(stats);
    report("process_null_handle", llama_mtp_process(NULL, &b));
    {
        float row[4] = {0};
        llama_pos rpos[1] = {0};
        int32_t supported = -1;
        report("process_embd_null_handle", llama_mtp_process_embd(NULL, 0, row, 1, 4, rpos, 1));
        report("embd_supported", llama_mtp_embd_supported(&supported));
        printf("INFO embd_supported %d\n", supported);
        report("embd_supported_null", llama_mtp_embd_supported(NULL));
    }
    report("begin_null_handle", llama_mtp_begin(NULL, 0, toks, 2));
    report("draft_null_handle", llama_mtp_draft(NULL, 0, 1, 0, 3, toks, 4, &nd));
    report("accept_null_handle", llama_mtp_accept(NULL, 0, 0));
    report("seq_rm_null_handle", llama_mtp_seq_rm(NULL, 0, 0, -1));
    report("step_null_handle", llama_mtp_step(NULL, 0, NULL, 1, 0, toks, 4, &nd));
    report("get_stats_null_handle", llama_mtp_get_stats(NULL, &stats));
    report("reset_stats_null_handle", llama_mtp_reset_stats(NULL));
    llama_mtp_free(NULL);
    printf("INFO get_context_null %d\n", llama_mtp_get_context(NULL) == NULL);

    /* a pointer that never came from llama_mtp_create */
    struct llama_mtp * foreign = (struct llama_mtp *) (void *) &stats;
    report("draft_foreign_handle", llama_mtp_draft(foreign, 0, 1, 0, 3, toks, 4, &nd));
    report("get_stats_foreign_handle", llama_mtp_get_stats(foreign, &stats));
    llama_mtp_free(foreign);
    printf("INFO free_foreign_says %d\n", llama_mtp_last_error()[0] != '\0');
    printf("INFO get_context_foreign_null %d\n", llama_mtp_get_context(foreign) == NULL);
}

static llama_pos target_pos_max(struct llama_context * ctx) {
    return llama_memory_seq_pos_max(llama_get_memory(ctx), 0);
}

static struct llama_model * load(const char * path, int load_mtp) {
    struct llama_model_params mp = llama_model_default_params();
    mp.load_mtp = load_mtp != 0;
    return llama_model_load_from_file(path, mp);
}

static struct llama_context * new_ctx_outputs(struct llama_model * m, uint32_t n_rs_seq,
                                              uint32_t n_outputs_max) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_outputs_max = n_outputs_max;
    cp.n_ctx = 256;
    cp.n_batch = 64;
    cp.n_ubatch = 64;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.n_rs_seq = n_rs_seq;
    return llama_init_from_model(m, cp);
}

static struct llama_context * new_ctx(struct llama_model * m, uint32_t n_rs_seq) {
    return new_ctx_outputs(m, n_rs_seq, 0);
}

/* Greedy tokens from plain decoding (no MTP), the reference for the speculative run. */
static int plain_greedy(struct llama_model * m, const llama_token * prompt, int n_prompt,
                        llama_token * out, int n_out) {
    struct llama_context * ctx = new_ctx(m, 0);
    if (!ctx) return -1;
    struct llama_sampler * smpl = llama_sampler_init_greedy();
    llama_token buf[64];
    memcpy(buf, prompt, sizeof(llama_token) * (size_t) n_prompt);
    struct llama_batch b = llama_batch_get_one(buf, n_prompt);
    for (int i = 0; i < n_out; ++i) {
        if (llama_decode(ctx, b) != 0) { llama_sampler_free(smpl); llama_free(ctx); return -1; }
        out[i] = llama_sampler_sample(smpl, ctx, -1);
        b = llama_batch_get_one(&out[i], 1);
    }
    llama_sampler_free(smpl);
    llama_free(ctx);
    return 0;
}

static void model_cases(const char * agree_path, const char * plain_path, const char * two_path) {
    struct llama_mtp_params p = default_params();
    struct llama_mtp * h = NULL;
    int32_t n = -1;

    /* a model with no NextN layers */
    struct llama_model * plain = load(plain_path, 1);
    if (!plain) { printf("INFO load_failed plain\n"); return; }
    report("nextn_plain", llama_mtp_model_n_nextn_layers(plain, &n));
    printf("INFO nextn_plain %d\n", n);
    struct llama_context * ctx = new_ctx(plain, 3);
    report("create_no_nextn", llama_mtp_create(ctx, &p, &h));
    llama_free(ctx);
    llama_model_free(plain);

    /* an MTP model loaded without load_mtp */
    struct llama_model * nomtp = load(agree_path, 0);
    if (!nomtp) { printf("INFO load_failed agree(load_mtp=0)\n"); return; }
    ctx = new_ctx(nomtp, 3);
    p = default_params();
    report("create_not_loaded_with_mtp", llama_mtp_create(ctx, &p, &h));
    llama_free(ctx);
    llama_model_free(nomtp);

    /* a model with more NextN layers than the qwen35 MTP graph takes */
    struct llama_model * two = load(two_path, 1);
    if (!two) { printf("INFO load_failed two\n"); return; }
    report("nextn_two", llama_mtp_model_n_nextn_layers(two, &n));
    printf("INFO nextn_two %d\n", n);
    ctx = new_ctx(two, 3);
    p = default_params();
    report("create_too_many_nextn_layers", llama_mtp_create(ctx, &p, &h));
    llama_free(ctx);
    llama_model_free(two);

    struct llama_model * agree = load(agree_path, 1);
    if (!agree) { printf("INFO load_failed agree\n"); return; }
    report("nextn_agree", llama_mtp_model_n_nextn_layers(agree, &n));
    printf("INFO nextn_agree %d\n", n);
    ctx = new_ctx(agree, 3);

    p = default_params();
    p.n_max = 0;
    report("create_n_max_zero", llama_mtp_create(ctx, &p, &h));
    p.n_max = -2;
    report("create_n_max_negative", llama_mtp_create(ctx, &p, &h));
    p = default_params();
    p.struct_size = 8;
    report("create_old_struct", llama_mtp_create(ctx, &p, &h));
    p = default_params();
    p.n_max = 5; /* > the target's n_rs_seq of 3 */
    report("create_rs_seq_too_small", llama_mtp_create(ctx, &p, &h));

    /* create after the target was decoded */
    {
        struct llama_context * used = new_ctx(agree, 3);
        llama_token t[2] = {1, 2};
        llama_decode(used, llama_batch_get_one(t, 2));
        p = default_params();
            report("create_after_decode", llama_mtp_create(used, &p, &h));
        llama_free(used);
    }

    /* a target that takes fewer outputs per batch than a step decodes */
    {
        struct llama_context * few = new_ctx_outputs(agree, 3, 2);
        p = default_params(); /* n_max 3: a step decodes 4 outputs */
#if defined(_WIN32)
        printf("INFO create_few_outputs_unchecked 1\n");
#else
        report("create_few_outputs", llama_mtp_create(few, &p, &h));
#endif
        llama_free(few);
    }

    p = default_params();
    report("create_ok", llama_mtp_create(ctx, &p, &h));
    if (!h) { llama_free(ctx); llama_model_free(agree); return; }
    printf("INFO has_mtp_context %d\n", llama_mtp_get_context(h) != NULL);

    llama_token draft[8];
    int32_t nd = -1;
    report("accept_nothing_drafted", llama_mtp_accept(h, 0, 1));
    report("accept_zero_nothing_drafted", llama_mtp_accept(h, 0, 0));
    report("draft_n_max_zero", llama_mtp_draft(h, 0, 1, 0, 0, draft, 8, &nd));
    report("draft_bad_seq", llama_mtp_draft(h, 7, 1, 0, 3, draft, 8, &nd));
    report("draft_small_buffer", llama_mtp_draft(h, 0, 1, 0, 3, draft, 1, &nd));

    /* prompt: decode all but the last token on the target, mirror it */
    enum { N_PROMPT = 8, N_GEN = 24 };
    llama_token prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; ++i) prompt[i] = 10 + 3 * i;
    struct llama_batch pb = llama_batch_init(N_PROMPT, 0, 1);
    for (int i = 0; i < N_PROMPT - 1; ++i) {
        pb.token[i] = prompt[i]; pb.pos[i] = i; pb.n_seq_id[i] = 1; pb.seq_id[i][0] = 0; pb.logits[i] = 0;
    }
    pb.n_tokens = N_PROMPT - 1;
    printf("INFO prompt_decode %d\n", llama_decode(ctx, pb));
    report("process_prompt", llama_mtp_process(h, &pb));
    {
        llama_pos n_ahead = 50; /* a position the target has not decoded */
        struct llama_batch nopos = pb;
        nopos.pos = NULL;
        report("process_no_pos", llama_mtp_process(h, &nopos));
        struct llama_batch ahead = pb;
        ahead.n_tokens = 1;
        ahead.pos = &n_ahead;
        report("process_not_decoded", llama_mtp_process(h, &ahead));
        struct llama_batch big = llama_batch_init(100, 0, 1);
        for (int i = 0; i < 100; ++i) {
            big.token[i] = 1; big.pos[i] = i; big.n_seq_id[i] = 1; big.seq_id[i][0] = 0; big.logits[i] = 0;
        }
        big.n_tokens = 100;
        report("process_over_n_batch", llama_mtp_process(h, &big));
        llama_batch_free(big);
    }
    {
        /* embedding rows (as a multimodal chunk gives them) at positions the target holds */
        enum { N_ROWS = 2 };
        const int32_t w = llama_model_n_embd_inp(agree);
        float * rows = (float *) calloc((size_t) (N_ROWS * (w + 1)), sizeof(float));
        llama_pos rpos[4 * N_ROWS] = {0};
        for (int i = 0; i < N_ROWS; ++i) rpos[i] = 3 + i; /* section 0; the rest stay 0 */
        report("process_embd_wrong_width", llama_mtp_process_embd(h, 0, rows, N_ROWS, w + 1, rpos, 1));
        report("process_embd_bad_n_pos", llama_mtp_process_embd(h, 0, rows, N_ROWS, w, rpos, 5));
        report("process_embd_null_rows", llama_mtp_process_embd(h, 0, NULL, N_ROWS, w, rpos, 1));
        report("process_embd_bad_seq", llama_mtp_process_embd(h, 9, rows, N_ROWS, w, rpos, 1));
        llama_pos ahead[N_ROWS] = {50, 51};
        report("process_embd_not_decoded", llama_mtp_process_embd(h, 0, rows, N_ROWS, w, ahead, 1));
        report("process_embd", llama_mtp_process_embd(h, 0, rows, N_ROWS, w, rpos, 4));
        free(rows);
    }
    {
        llama_token bad_prompt[2] = {prompt[0], 1 << 20};
        report("begin_token_out_of_vocab", llama_mtp_begin(h, 0, bad_prompt, 2));
        llama_token bad = -3;
        llama_pos p0 = 0;
        struct llama_batch oov = pb;
        oov.n_tokens = 1;
        oov.token = &bad;
        oov.pos = &p0;
        report("process_token_out_of_vocab", llama_mtp_process(h, &oov));
    }
    report("begin", llama_mtp_begin(h, 0, prompt, N_PROMPT - 1));

    /* manual protocol: draft, verify on the target, mirror, accept too many, accept */
    llama_token id_last = prompt[N_PROMPT - 1];
    llama_pos n_past = N_PROMPT - 1;
    report("draft_token_out_of_vocab", llama_mtp_draft(h, 0, 1 << 20, n_past, 3, draft, 8, &nd));
    report("draft_wrong_pos", llama_mtp_draft(h, 0, id_last, n_past + 3, 3, draft, 8, &nd));
    report("draft", llama_mtp_draft(h, 0, id_last, n_past, 3, draft, 8, &nd));
    {
        const int32_t w = llama_model_n_embd_inp(agree);
        float * rows = (float *) calloc((size_t) w, sizeof(float));
        llama_pos rpos[1] = {1};
        report("process_embd_draft_pending", llama_mtp_process_embd(h, 0, rows, 1, w, rpos, 1));
        free(rows);
    }
    printf("INFO drafted %d\n", nd);
    {
        llama_token again[8];
        int32_t n_again = -1;
        report("draft_again_before_accept",
               llama_mtp_draft(h, 0, id_last, n_past, 3, again, 8, &n_again));
    }
    report("accept_before_mirror", llama_mtp_accept(h, 0, 0));
    struct llama_batch vb = llama_batch_init(8, 0, 1);
    vb.n_tokens = 1 + nd;
    for (int i = 0; i <= nd; ++i) {
        vb.token[i] = i == 0 ? id_last : draft[i - 1];
        vb.pos[i] = n_past + i; vb.n_seq_id[i] = 1; vb.seq_id[i][0] = 0; vb.logits[i] = 1;
    }
    printf("INFO verify_decode %d\n", llama_decode(ctx, vb));
    report("process_verify", llama_mtp_process(h, &vb));
    report("accept_too_many", llama_mtp_accept(h, 0, nd + 1));
    report("accept_negative", llama_mtp_accept(h, 0, -1));
    /* greedy verification */
    struct llama_sampler * smpl = llama_sampler_init_greedy();
    int32_t acc = 0;
    llama_token next = 0;
    for (int i = 0; i <= nd; ++i) {
        next = llama_sampler_sample(smpl, ctx, i);
        if (i == nd || next != draft[i]) break;
        acc++;
    }
    report("accept", llama_mtp_accept(h, 0, acc));
    report("accept_twice", llama_mtp_accept(h, 0, 0));
    report("seq_rm_bad_range", llama_mtp_seq_rm(h, 0, 5, 2));
    {
        const llama_pos before = target_pos_max(ctx);
        /* a tail longer than the recurrent target keeps snapshots for (n_rs_seq 3): llama.cpp
         * refuses, and nothing may be removed from either context */
        report("seq_rm_refused", llama_mtp_seq_rm(h, 0, 2, -1));
        printf("INFO seq_rm_refused_kept %d\n", target_pos_max(ctx) == before);
    }
    report("seq_rm", llama_mtp_seq_rm(h, 0, n_past + 1 + acc, -1));

    /* step-driven generation, compared against plain greedy decoding */
    llama_token gen[N_GEN + 8];
    int n_gen = 0;
    for (int i = 0; i < acc; ++i) gen[n_gen++] = draft[i];
    gen[n_gen++] = next;
    n_past += 1 + acc;
    id_last = next;
    report("step_null_sampler", llama_mtp_step(h, 0, NULL, id_last, n_past, draft, 8, &nd));
    report("step_zero_capacity", llama_mtp_step(h, 0, smpl, id_last, n_past, draft, 0, &nd));
    report("step_token_out_of_vocab", llama_mtp_step(h, 0, smpl, 1 << 20, n_past, draft, 8, &nd));
    {
        const llama_pos before = target_pos_max(ctx);
        report("step_wrong_n_past", llama_mtp_step(h, 0, smpl, id_last, n_past - 2, draft, 8, &nd));
        printf("INFO step_wrong_n_past_kept %d\n", target_pos_max(ctx) == before);
        /* a chain with no sampler in it selects nothing */
        struct llama_sampler * empty = llama_sampler_chain_init(llama_sampler_chain_default_params());
        report("step_sampler_selects_none", llama_mtp_step(h, 0, empty, id_last, n_past, draft, 8, &nd));
        printf("INFO step_sampler_selects_none_kept %d\n", target_pos_max(ctx) == before);
        llama_sampler_free(empty);
    }
    enum llama_mtp_status st = LLAMA_MTP_STATUS_OK;
    while (n_gen < N_GEN && st == LLAMA_MTP_STATUS_OK) {
        int32_t got = 0;
        st = llama_mtp_step(h, 0, smpl, id_last, n_past, draft, 8, &got);
        for (int i = 0; i < got && n_gen < N_GEN + 8; ++i) gen[n_gen++] = draft[i];
        if (got > 0) { id_last = draft[got - 1]; n_past += got; }
    }
    report("steps", st);

    struct llama_mtp_stats stats;
    memset(&stats, 0, sizeof(stats));
    stats.struct_size = sizeof(stats);
    report("get_stats", llama_mtp_get_stats(h, &stats));
    printf("INFO stats %llu %llu %llu %llu\n", (unsigned long long) stats.n_drafts,
           (unsigned long long) stats.n_drafted, (unsigned long long) stats.n_accepted,
           (unsigned long long) stats.n_steps);
    printf("INFO backend_sampled %llu\n", (unsigned long long) stats.n_backend_sampled);
    /* a caller built against the first release's struct (it ended after n_steps) */
    struct llama_mtp_stats v1_stats;
    memset(&v1_stats, 0xAB, sizeof(v1_stats));
    v1_stats.struct_size = (uint32_t) offsetof(struct llama_mtp_stats, n_backend_sampled);
    report("get_stats_v1_struct", llama_mtp_get_stats(h, &v1_stats));
    unsigned char untouched[sizeof(v1_stats.n_backend_sampled)];
    memset(untouched, 0xAB, sizeof(untouched));
    printf("INFO v1_stats_tail_untouched %d\n",
           memcmp(&v1_stats.n_backend_sampled, untouched, sizeof(untouched)) == 0 &&
               v1_stats.n_steps == stats.n_steps);
    struct llama_mtp_stats old_stats;
    old_stats.struct_size = 4;
    report("get_stats_old_struct", llama_mtp_get_stats(h, &old_stats));
    report("reset_stats", llama_mtp_reset_stats(h));
    llama_mtp_get_stats(h, &stats);
    printf("INFO stats_after_reset %llu %llu %llu %llu\n", (unsigned long long) stats.n_drafts,
           (unsigned long long) stats.n_drafted, (unsigned long long) stats.n_accepted,
           (unsigned long long) stats.n_steps);

    llama_token ref[N_GEN];
    int same = plain_greedy(agree, prompt, N_PROMPT, ref, N_GEN) == 0;
    for (int i = 0; same && i < N_GEN; ++i) same = ref[i] == gen[i];
    printf("INFO greedy_identical %d\n", same);

    llama_batch_free(pb);
    llama_batch_free(vb);
    llama_mtp_free(h);
    report("accept_freed_handle", llama_mtp_accept(h, 0, 0));
    report("step_freed_handle", llama_mtp_step(h, 0, smpl, id_last, n_past, draft, 8, &nd));
    llama_mtp_free(h); /* twice: refused, not a double free */
    printf("INFO free_twice_says %d\n", llama_mtp_last_error()[0] != '\0');
    printf("INFO get_context_freed_null %d\n", llama_mtp_get_context(h) == NULL);
    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(agree);
}

static struct llama_mtp_strategy strategy(int32_t type) {
    struct llama_mtp_strategy s;
    memset(&s, 0, sizeof(s));
    s.struct_size = sizeof(s);
    llama_mtp_default_strategy(type, &s);
    return s;
}

static void no_model_strategy_cases(void) {
    struct llama_mtp_strategy s;
    memset(&s, 0, sizeof(s));
    s.struct_size = sizeof(s);
    report("default_strategy", llama_mtp_default_strategy(LLAMA_MTP_STRATEGY_NGRAM_MAP_K, &s));
    printf("INFO default_ngram %d %d %d %d %d %d\n", s.size_n, s.size_m, s.min_hits, s.n_match,
           s.mod_n_min, s.mod_n_max);
    report("default_strategy_bad_type", llama_mtp_default_strategy(42, &s));
    s.struct_size = 4;
    report("default_strategy_old_struct", llama_mtp_default_strategy(LLAMA_MTP_STRATEGY_DRAFT_MTP, &s));
    report("strategy_supported_mtp", llama_mtp_strategy_supported(LLAMA_MTP_STRATEGY_DRAFT_MTP));
    report("strategy_supported_ngram_cache", llama_mtp_strategy_supported(LLAMA_MTP_STRATEGY_NGRAM_CACHE));
    report("strategy_supported_eagle3", llama_mtp_strategy_supported(LLAMA_MTP_STRATEGY_DRAFT_EAGLE3));
    report("strategy_supported_dflash", llama_mtp_strategy_supported(LLAMA_MTP_STRATEGY_DRAFT_DFLASH));
    report("strategy_supported_dspark", llama_mtp_strategy_supported(LLAMA_MTP_STRATEGY_DRAFT_DSPARK));
    report("strategy_supported_bogus", llama_mtp_strategy_supported(0));
    const char * name = llama_mtp_strategy_name(LLAMA_MTP_STRATEGY_NGRAM_MOD);
    printf("INFO name_ngram_mod %s\n", name ? name : "(null)");
    printf("INFO name_bogus_null %d\n", llama_mtp_strategy_name(99) == NULL);
    /* every value's status name, "-" for NULL: the test compares them with the header's enum */
    printf("INFO status_names");
    for (int32_t v = -1; v < 64; ++v) {
        const char * status = llama_mtp_status_name(v);
        printf(" %d=%s", (int) v, status ? status : "-");
    }
    printf("\n");
    printf("INFO n_strategies_null %d\n", llama_mtp_n_strategies(NULL));
}

/* The chat section on template texts (no model): every misuse a status, never an abort. */
static const char * k_chat_template =
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}";
static const char * k_chat_request =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi\"}]}";

static void chat_apply_cases(struct llama_mtp_chat_templates * t) {
    struct llama_mtp_chat * chat = NULL;
    char * result = NULL;
    report("chat_apply_null_request", llama_mtp_chat_apply(t, NULL, &chat, &result));
    report("chat_apply_not_json", llama_mtp_chat_apply(t, "{messages", &chat, &result));
    report("chat_apply_no_messages", llama_mtp_chat_apply(t, "{}", &chat, &result));
    report("chat_apply_messages_not_array", llama_mtp_chat_apply(t, "{\"messages\": 3}", &chat, &result));
    report("chat_apply_bad_tool_choice", llama_mtp_chat_apply(t,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"sometimes\"}",
        &chat, &result));
    report("chat_apply_grammar_and_schema", llama_mtp_chat_apply(t,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"grammar\": \"root ::= \\\"a\\\"\","
        " \"json_schema\": {\"type\": \"string\"}}", &chat, &result));
    report("chat_apply_bad_schema", llama_mtp_chat_apply(t,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}],"
        " \"json_schema\": {\"$ref\": \"#/definitions/missing\"}}", &chat, &result));
    printf("INFO chat_apply_refused_cleared %d\n", chat == NULL && result == NULL);
    report("chat_apply", llama_mtp_chat_apply(t, k_chat_request, &chat, &result));
    printf("INFO chat_result %s\n", result ? result : "(null)");
    llama_mtp_string_free(result);
    char * message = NULL;
    report("chat_parse", llama_mtp_chat_parse(chat, "Hello there", 0, &message));
    printf("INFO chat_message %s\n", message ? message : "(null)");
    llama_mtp_string_free(message);
    report("chat_parse_null_text", llama_mtp_chat_parse(chat, NULL, 0, &message));
    llama_mtp_chat_free(chat);
    report("chat_parse_freed", llama_mtp_chat_parse(chat, "x", 0, &message));
    report("chat_parse_foreign", llama_mtp_chat_parse((struct llama_mtp_chat *) (void *) &message,
                                                      "x", 0, &message));
    llama_mtp_chat_free(chat); /* twice: ignored */
}

static void chat_cases(void) {
    struct llama_mtp_chat_templates * t = NULL;
    struct llama_mtp_chat * chat = NULL;
    char * text = NULL;
    report("chat_supported", llama_mtp_chat_supported());
    report("chat_init_null_out", llama_mtp_chat_templates_init(NULL, k_chat_template, NULL));
    report("chat_init_nothing", llama_mtp_chat_templates_init(NULL, NULL, &t));
    report("chat_init_bad_jinja", llama_mtp_chat_templates_init(NULL, "{% if %}", &t));
    printf("INFO chat_init_refused_cleared %d\n", t == NULL);
    /* a template that raises on what one conversation says (llama.cpp's chat layer works
     * around templates that merely lack a system role, so that is not the case to test) */
    report("chat_init_raising", llama_mtp_chat_templates_init(NULL,
        "{% for m in messages %}{% if m['content'] is string and 'forbidden' in m['content'] %}"
        "{{ raise_exception('this template refuses the word forbidden') }}{% endif %}"
        "<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}", &t));
    report("chat_apply_raising", llama_mtp_chat_apply(t,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a forbidden word\"}]}", &chat, &text));
    /* llama.cpp's message runs over several lines: the template's own words are in it */
    printf("INFO chat_apply_raising_says_why %d\n",
           strstr(llama_mtp_last_error(), "refuses the word forbidden") != NULL);
    llama_mtp_chat_templates_free(t);
    t = NULL;
    report("chat_init", llama_mtp_chat_templates_init(NULL, k_chat_template, &t));
    report("chat_info", llama_mtp_chat_templates_info(t, &text));
    llama_mtp_string_free(text);
    text = NULL;
    chat_apply_cases(t);
    llama_mtp_chat_templates_free(t);
    report("chat_info_freed", llama_mtp_chat_templates_info(t, &text));
    report("chat_apply_freed", llama_mtp_chat_apply(t, k_chat_request, &chat, &text));
    llama_mtp_chat_templates_free(t); /* twice: ignored */
    report("schema_to_grammar", llama_mtp_json_schema_to_grammar(
        "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}}", &text));
    printf("INFO schema_grammar_has_root %d\n", text != NULL && strstr(text, "root ::=") != NULL);
    llama_mtp_string_free(text);
    report("schema_not_json", llama_mtp_json_schema_to_grammar("{type", &text));
    report("schema_unresolvable", llama_mtp_json_schema_to_grammar("{\"$ref\": \"#/definitions/missing\"}", &text));
    report("schema_null", llama_mtp_json_schema_to_grammar(NULL, &text));
    llama_mtp_string_free(NULL);
}

/* llama_mtp_create on a fresh context of the target with these strategies and p_min; the
 * handle is freed. */
static enum llama_mtp_status try_create_p_min(struct llama_model * target,
                                              const struct llama_mtp_strategy * list, uint32_t n,
                                              struct llama_model * draft, float p_min) {
    struct llama_context * ctx = new_ctx(target, 8);
    struct llama_mtp_params p = default_params();
    p.n_max = 8;
    p.p_min = p_min;
    p.strategies = list;
    p.n_strategies = n;
    p.draft_model = draft;
    struct llama_mtp * h = NULL;
    enum llama_mtp_status st = llama_mtp_create(ctx, &p, &h);
    llama_mtp_free(h);
    llama_free(ctx);
    return st;
}

/* llama_mtp_create on a fresh agree context with these strategies; the handle is freed. */
static enum llama_mtp_status try_create(struct llama_model * agree, const struct llama_mtp_strategy * list,
                                        uint32_t n, struct llama_model * draft) {
    return try_create_p_min(agree, list, n, draft, 0.0f);
}

/* A speculative run with these strategies on a prompt that repeats itself; prints
 * INFO <label>_identical, <label>_totals (drafted accepted), <label>_per (type drafts drafted
 * accepted, per strategy) and <label>_sums (per-strategy counters add up to the totals). */
static void strategy_run(const char * label, struct llama_model * agree, const struct llama_mtp_strategy * list,
                         uint32_t n, struct llama_model * draft) {
    enum { N_PROMPT = 28, N_GEN = 32 };
    llama_token prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; ++i) prompt[i] = 10 + i % 12;
    char name[96];
    struct llama_context * ctx = new_ctx(agree, 8);
    struct llama_mtp_params p = default_params();
    p.n_max = 8;
    p.strategies = list;
    p.n_strategies = n;
    p.draft_model = draft;
    struct llama_mtp * h = NULL;
    snprintf(name, sizeof(name), "%s_create", label);
    enum llama_mtp_status st = llama_mtp_create(ctx, &p, &h);
    report(name, st);
    if (st != LLAMA_MTP_STATUS_OK) { llama_free(ctx); return; }
    struct llama_batch pb = llama_batch_init(N_PROMPT, 0, 1);
    for (int i = 0; i < N_PROMPT - 1; ++i) {
        pb.token[i] = prompt[i]; pb.pos[i] = i; pb.n_seq_id[i] = 1; pb.seq_id[i][0] = 0;
        pb.logits[i] = i == N_PROMPT - 2;
    }
    pb.n_tokens = N_PROMPT - 1;
    st = llama_decode(ctx, pb) == 0 ? llama_mtp_process(h, &pb) : LLAMA_MTP_STATUS_DECODE_FAILED;
    if (st == LLAMA_MTP_STATUS_OK) st = llama_mtp_begin(h, 0, prompt, N_PROMPT - 1);
    struct llama_sampler * smpl = llama_sampler_init_greedy();
    llama_token gen[N_GEN + 16];
    llama_token out[16];
    int n_gen = 0;
    llama_token id_last = prompt[N_PROMPT - 1];
    llama_pos n_past = N_PROMPT - 1;
    while (st == LLAMA_MTP_STATUS_OK && n_gen < N_GEN) {
        int32_t got = 0;
        st = llama_mtp_step(h, 0, smpl, id_last, n_past, out, 9, &got);
        for (int i = 0; i < got; ++i) gen[n_gen++] = out[i];
        n_past += got;
        if (got > 0) id_last = out[got - 1];
    }
    snprintf(name, sizeof(name), "%s_steps", label);
    report(name, st);
    llama_token ref[N_GEN + 16];
    int same = plain_greedy(agree, prompt, N_PROMPT, ref, n_gen) == 0;
    for (int i = 0; same && i < n_gen; ++i) same = ref[i] == gen[i];
    printf("INFO %s_identical %d\n", label, same && n_gen >= N_GEN);
    struct llama_mtp_stats stats;
    memset(&stats, 0, sizeof(stats));
    stats.struct_size = sizeof(stats);
    llama_mtp_get_stats(h, &stats);
    printf("INFO %s_totals %llu %llu\n", label, (unsigned long long) stats.n_drafted,
           (unsigned long long) stats.n_accepted);
    unsigned long long drafted = 0, accepted = 0;
    printf("INFO %s_per", label);
    for (int32_t i = 0; i < llama_mtp_n_strategies(h); ++i) {
        struct llama_mtp_strategy_stats ss;
        memset(&ss, 0, sizeof(ss));
        ss.struct_size = sizeof(ss);
        llama_mtp_get_strategy_stats(h, i, &ss);
        printf(" %d:%llu:%llu:%llu", ss.type, (unsigned long long) ss.n_drafts,
               (unsigned long long) ss.n_drafted, (unsigned long long) ss.n_accepted);
        drafted += ss.n_drafted;
        accepted += ss.n_accepted;
    }
    printf("\n");
    printf("INFO %s_sums %d\n", label, drafted == stats.n_drafted && accepted == stats.n_accepted);
    struct llama_mtp_strategy_stats bad;
    bad.struct_size = sizeof(bad);
    snprintf(name, sizeof(name), "%s_stats_bad_index", label);
    report(name, llama_mtp_get_strategy_stats(h, llama_mtp_n_strategies(h), &bad));
    llama_sampler_free(smpl);
    llama_batch_free(pb);
    llama_mtp_free(h);
    llama_free(ctx);
}

static void strategy_cases(const char * agree_path, const char * plain_path, const char * other_path,
                           const char * cache_ok, const char * cache_bad, const char * missing) {
    struct llama_model * agree = load(agree_path, 1);
    struct llama_model * plain = load(plain_path, 0);
    struct llama_model * other = load(other_path, 0);
    if (!agree || !plain || !other) { printf("INFO load_failed strategies\n"); return; }
    struct llama_mtp_strategy two[2];

    two[0] = strategy(LLAMA_MTP_STRATEGY_DRAFT_MTP);
    two[1] = strategy(LLAMA_MTP_STRATEGY_DRAFT_SIMPLE);
    report("create_two_draft_contexts", try_create(agree, two, 2, plain));
    two[0] = strategy(LLAMA_MTP_STRATEGY_DRAFT_EAGLE3);
    report("create_eagle3", try_create(agree, two, 1, plain));
    two[0] = strategy(LLAMA_MTP_STRATEGY_DRAFT_MTP);
    two[0].type = 42;
    report("create_unknown_strategy", try_create(agree, two, 1, NULL));
    two[0] = strategy(LLAMA_MTP_STRATEGY_NGRAM_MOD);
    two[1] = strategy(LLAMA_MTP_STRATEGY_NGRAM_MOD);
    report("create_strategy_twice", try_create(agree, two, 2, NULL));
    two[0] = strategy(LLAMA_MTP_STRATEGY_NGRAM_SIMPLE);
    two[0].size_n = 0;
    report("create_ngram_size_zero", try_create(agree, two, 1, NULL));
    two[0].size_n = 8;
    two[0].size_m = 4;
    report("create_ngram_simple_m_below_n", try_create(agree, two, 1, NULL));
    two[0] = strategy(LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V);
    two[0].size_m = 5000;
    report("create_ngram_size_too_big", try_create(agree, two, 1, NULL));
    two[0] = strategy(LLAMA_MTP_STRATEGY_NGRAM_MOD);
    two[0].mod_n_min = two[0].mod_n_max + 1;
    report("create_mod_min_over_max", try_create(agree, two, 1, NULL));
    two[0] = strategy(LLAMA_MTP_STRATEGY_NGRAM_CACHE);
    two[0].cache_static = missing;
    report("create_cache_missing_file", try_create(agree, two, 1, NULL));
    two[0].cache_static = NULL;
    two[0].cache_dynamic = cache_bad;
    report("create_cache_malformed_file", try_create(agree, two, 1, NULL));
    two[0].cache_dynamic = cache_ok;
    two[0].cache_static = cache_ok;
    report("create_cache_valid_files", try_create(agree, two, 1, NULL));
    two[0] = strategy(LLAMA_MTP_STRATEGY_DRAFT_SIMPLE);
    report("create_simple_without_draft_model", try_create(agree, two, 1, NULL));
    report("create_simple_vocab_mismatch", try_create(agree, two, 1, other));
    two[0] = strategy(LLAMA_MTP_STRATEGY_NGRAM_MOD);
    report("create_draft_model_unused", try_create(agree, two, 1, plain));
    report("create_strategies_null_with_count", try_create(agree, NULL, 2, NULL));
    two[0].struct_size = 4;
    report("create_strategy_old_struct", try_create(agree, two, 1, NULL));

    /* runs: each n-gram strategy alone, draft-simple, and a mix with draft-mtp */
    const int32_t ngram[] = {LLAMA_MTP_STRATEGY_NGRAM_SIMPLE, LLAMA_MTP_STRATEGY_NGRAM_MAP_K,
                             LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V, LLAMA_MTP_STRATEGY_NGRAM_MOD,
                             LLAMA_MTP_STRATEGY_NGRAM_CACHE};
    for (size_t i = 0; i < sizeof(ngram) / sizeof(ngram[0]); ++i) {
        char label[32];
        snprintf(label, sizeof(label), "run_%s", llama_mtp_strategy_name(ngram[i]));
        for (char * c = label; *c; ++c) if (*c == '-') *c = '_';
        two[0] = strategy(ngram[i]);
        two[0].size_n = 3;
        two[0].size_m = 8;
        two[0].n_match = 3;
        two[0].mod_n_min = 1;
        strategy_run(label, agree, two, 1, NULL);
    }
    two[0] = strategy(LLAMA_MTP_STRATEGY_DRAFT_SIMPLE);
    strategy_run("run_draft_simple", agree, two, 1, plain);
    two[0] = strategy(LLAMA_MTP_STRATEGY_DRAFT_MTP);
    two[1] = strategy(LLAMA_MTP_STRATEGY_NGRAM_SIMPLE);
    two[1].size_n = 3;
    two[1].size_m = 8;
    strategy_run("run_mix", agree, two, 2, NULL);

    llama_model_free(other);
    llama_model_free(plain);
    llama_model_free(agree);
}

/* --layer-draft: see the top of this file. A draft llama.cpp's loader refuses is reported as
 * INFO draft_load_failed 1 (no case line). */
static void layer_draft_case(char ** argv, int run) {
    const char * name = argv[0];
    int32_t type = 0;
    for (int32_t t = 1; t < 64 && type == 0; ++t) {
        const char * s = llama_mtp_strategy_name(t);
        if (s != NULL && strcmp(s, argv[3]) == 0) type = t;
    }
    struct llama_model * target = load(argv[1], 0);
    if (!target || type == 0) { printf("INFO setup_failed %s\n", name); return; }
    struct llama_model * draft = load(argv[2], 0);
    printf("INFO draft_load_failed %d\n", draft == NULL);
    if (draft) {
        struct llama_mtp_strategy one = strategy(type);
        report(name, try_create_p_min(target, &one, 1, draft, (float) atof(argv[4])));
        if (run) strategy_run(name, target, &one, 1, draft);
        llama_model_free(draft);
    }
    llama_model_free(target);
}

int main(int argc, char ** argv) {
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    if (argc >= 7 && strcmp(argv[1], "--layer-draft") == 0) {
        layer_draft_case(argv + 2, argc >= 8 && strcmp(argv[7], "run") == 0);
        llama_backend_free();
        printf("DONE\n");
        return 0;
    }
    no_model_cases();
    no_model_strategy_cases();
    chat_cases();
    if (argc >= 4) {
        model_cases(argv[1], argv[2], argv[3]);
    }
    if (argc >= 8) {
        strategy_cases(argv[1], argv[2], argv[4], argv[5], argv[6], argv[7]);
    }
    llama_backend_free();
    printf("DONE\n");
    return 0;
}
