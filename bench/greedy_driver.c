/* Greedy generation in C, the loop llama-bindgen's runtime runs in Python (plain mode):
 * tokenize, decode the prompt, then per token: sample (greedy), end-of-generation check,
 * token-to-piece, decode one token. Prints one JSON line.
 * usage: greedy_driver MODEL PROMPT N_PREDICT N_THREADS N_CTX */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void quiet_log(enum ggml_log_level level, const char * text, void * data) {
    (void) level; (void) text; (void) data;
}

int main(int argc, char ** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s MODEL PROMPT N_PREDICT N_THREADS N_CTX\n", argv[0]);
        return 2;
    }
    const char * path = argv[1];
    const char * prompt = argv[2];
    const int n_predict = atoi(argv[3]);
    const int n_threads = atoi(argv[4]);
    const int n_ctx = atoi(argv[5]);

    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model * model = llama_model_load_from_file(path, mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", path); return 1; }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) n_ctx;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create the context\n"); return 1; }

    const int plen = (int) strlen(prompt);
    int cap = plen + 8;
    llama_token * toks = malloc(sizeof(llama_token) * (size_t) cap);
    int n = llama_tokenize(vocab, prompt, plen, toks, cap, true, false);
    if (n < 0) { fprintf(stderr, "tokenize failed\n"); return 1; }

    struct llama_sampler * smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());

    if (llama_decode(ctx, llama_batch_get_one(toks, n)) != 0) { fprintf(stderr, "decode\n"); return 1; }
    llama_token * out = malloc(sizeof(llama_token) * (size_t) (n_predict > 0 ? n_predict : 1));
    int n_out = 0;
    char piece[64];
    size_t bytes = 0;
    const double t0 = now_s();
    while (n_out < n_predict) {
        llama_token tok = llama_sampler_sample(smpl, ctx, -1);
        if (llama_vocab_is_eog(vocab, tok)) break;
        int len = llama_token_to_piece(vocab, tok, piece, (int) sizeof piece, 0, false);
        bytes += len > 0 ? (size_t) len : 0;
        out[n_out++] = tok;
        if (n_out >= n_predict) break;
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) { fprintf(stderr, "decode\n"); return 1; }
    }
    const double dt = now_s() - t0;

    printf("{\"generated_tokens\": %d, \"generation_seconds\": %.9f, \"tokens_per_second\": %.6f, "
           "\"prompt_tokens\": %d, \"bytes\": %zu, \"tokens\": [", n_out, dt, n_out / dt, n, bytes);
    for (int i = 0; i < n_out; i++) printf(i ? ", %d" : "%d", out[i]);
    printf("]}\n");

    llama_sampler_free(smpl);
    free(out);
    free(toks);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
