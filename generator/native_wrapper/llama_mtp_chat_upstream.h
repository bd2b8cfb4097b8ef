// The wrapper's door to llama.cpp's chat layer (common/chat.*, its Jinja engine, the per-family
// parsers and common/json-schema-to-grammar.*).
//
// llama_mtp_chat_upstream.cpp is the only file that includes those headers; it picks each
// variant by the configure-time probes (LLAMA_MTP_UP_CHAT*, upstream_probes.cmake) and takes the
// types the tree's functions declare (its JSON type, the parser's input type) from their
// declarations. The C ABI (llama_mtp_chat.cpp) sees only the declarations below: strings in and
// out, the same for every tag. Every function here may throw; the C ABI catches.

#pragma once

#include "llama.h"
#include "llama_mtp.h"

#include <memory>
#include <stdexcept>
#include <string>

namespace llama_mtp_chat_upstream {

// Whether the tree has the chat layer (LLAMA_MTP_UP_CHAT): without it every call below throws
// not_in_release.
bool supported();

// An error with the status the C ABI returns for it.
struct error : std::runtime_error {
    error(llama_mtp_status status, const std::string & message)
        : std::runtime_error(message), status(status) {}
    llama_mtp_status status;
};

class templates;
class rendered;

// A model's templates, or template_text's (non-null) instead.
std::unique_ptr<templates> templates_init(const llama_model * model, const char * template_text);

// {"source", "caps", "supports_thinking"}
std::string templates_info(const templates & tmpls);

// Render a request (llama_mtp.h's shape); the rendered request and, in result_json, the result.
std::unique_ptr<rendered> apply(const templates & tmpls, const std::string & request_json,
                                std::string & result_json);

// Parse generated text with the rendered request's format: the message as JSON.
std::string parse(const rendered & chat, const std::string & text, bool is_partial);

// A JSON schema as GBNF.
std::string schema_to_grammar(const std::string & schema_json);

// Deleters for the opaque types (their definitions live in the .cpp).
void destroy(templates * tmpls);
void destroy(rendered * chat);

}  // namespace llama_mtp_chat_upstream

// unique_ptr of the opaque types deletes through destroy().
namespace std {
template <> struct default_delete<llama_mtp_chat_upstream::templates> {
    void operator()(llama_mtp_chat_upstream::templates * p) const {
        llama_mtp_chat_upstream::destroy(p);
    }
};
template <> struct default_delete<llama_mtp_chat_upstream::rendered> {
    void operator()(llama_mtp_chat_upstream::rendered * p) const {
        llama_mtp_chat_upstream::destroy(p);
    }
};
}  // namespace std
