// The C ABI of llama_mtp.h's chat section: argument checks, handle bookkeeping, strings handed
// out with malloc, and every exception turned into a status with its message
// (llama_mtp_last_error). The chat layer itself is reached through llama_mtp_chat_upstream.

#include "llama_mtp.h"
#include "llama_mtp_chat_upstream.h"
#include "llama_mtp_guard.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace chat_up = llama_mtp_chat_upstream;
using llama_mtp_impl::fail;
using llama_mtp_impl::guarded;
using llama_mtp_impl::live_set;
using llama_mtp_impl::ok;

// The opaque handles of the header: each owns what the door made.
struct llama_mtp_chat_templates {
    std::unique_ptr<chat_up::templates> impl;
};

struct llama_mtp_chat {
    std::unique_ptr<chat_up::rendered> impl;
};

namespace {

live_set<llama_mtp_chat_templates> g_templates;
live_set<llama_mtp_chat> g_chats;

// guarded(), with the door's errors (a status of their own) turned into their status.
template <typename F> llama_mtp_status chat_guarded(const char * where, F && body) noexcept {
    return guarded(where, [&]() {
        try {
            return body();
        } catch (const chat_up::error & e) {
            return fail(e.status, std::string(where) + ": " + e.what());
        }
    });
}

// A copy of `text` the caller frees with llama_mtp_string_free.
char * handed_out(const std::string & text) {
    char * out = static_cast<char *>(std::malloc(text.size() + 1));
    if (out == nullptr) {
        throw std::bad_alloc();
    }
    std::memcpy(out, text.c_str(), text.size() + 1);
    return out;
}

llama_mtp_status not_live(const char * where, const char * what) {
    return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                std::string(where) + ": " + what + " is not a live handle (already freed, or not "
                                                   "returned by this library)");
}

}  // namespace

extern "C" {

llama_mtp_status llama_mtp_chat_supported(void) {
    if (chat_up::supported()) {
        return ok();
    }
    return fail(LLAMA_MTP_STATUS_NOT_IN_RELEASE,
                "llama_mtp_chat_supported: the llama.cpp release this library was built from has "
                "no chat layer the wrapper can drive");
}

llama_mtp_status llama_mtp_chat_templates_init(const llama_model * model, const char * template_text,
                                               llama_mtp_chat_templates ** out) {
    const char * where = "llama_mtp_chat_templates_init";
    return chat_guarded(where, [&]() {
        if (out == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, std::string(where) + ": out is NULL");
        }
        *out = nullptr;
        if (model == nullptr && template_text == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        std::string(where) + ": give a model, a template_text or both");
        }
        auto handle = std::make_unique<llama_mtp_chat_templates>();
        handle->impl = chat_up::templates_init(model, template_text);
        g_templates.add(handle.get());
        *out = handle.release();
        return ok();
    });
}

void llama_mtp_chat_templates_free(llama_mtp_chat_templates * templates) {
    if (templates != nullptr && g_templates.remove(templates)) {
        delete templates;
    }
}

llama_mtp_status llama_mtp_chat_templates_info(const llama_mtp_chat_templates * templates,
                                               char ** info) {
    const char * where = "llama_mtp_chat_templates_info";
    return chat_guarded(where, [&]() {
        if (info == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, std::string(where) + ": info is NULL");
        }
        *info = nullptr;
        if (templates == nullptr || !g_templates.contains(templates)) {
            return not_live(where, "templates");
        }
        *info = handed_out(chat_up::templates_info(*templates->impl));
        return ok();
    });
}

llama_mtp_status llama_mtp_chat_apply(const llama_mtp_chat_templates * templates,
                                      const char * request_json, llama_mtp_chat ** chat,
                                      char ** result_json) {
    const char * where = "llama_mtp_chat_apply";
    return chat_guarded(where, [&]() {
        if (chat == nullptr || result_json == nullptr || request_json == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        std::string(where) + ": request_json, chat and result_json must be given");
        }
        *chat = nullptr;
        *result_json = nullptr;
        if (templates == nullptr || !g_templates.contains(templates)) {
            return not_live(where, "templates");
        }
        std::string result;
        auto handle = std::make_unique<llama_mtp_chat>();
        handle->impl = chat_up::apply(*templates->impl, request_json, result);
        char * text = handed_out(result);
        g_chats.add(handle.get());
        *chat = handle.release();
        *result_json = text;
        return ok();
    });
}

llama_mtp_status llama_mtp_chat_parse(const llama_mtp_chat * chat, const char * text,
                                      int32_t is_partial, char ** message_json) {
    const char * where = "llama_mtp_chat_parse";
    return chat_guarded(where, [&]() {
        if (message_json == nullptr || text == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        std::string(where) + ": text and message_json must be given");
        }
        *message_json = nullptr;
        if (chat == nullptr || !g_chats.contains(chat)) {
            return not_live(where, "chat");
        }
        *message_json = handed_out(chat_up::parse(*chat->impl, text, is_partial != 0));
        return ok();
    });
}

void llama_mtp_chat_free(llama_mtp_chat * chat) {
    if (chat != nullptr && g_chats.remove(chat)) {
        delete chat;
    }
}

llama_mtp_status llama_mtp_json_schema_to_grammar(const char * schema_json, char ** grammar) {
    const char * where = "llama_mtp_json_schema_to_grammar";
    return chat_guarded(where, [&]() {
        if (schema_json == nullptr || grammar == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        std::string(where) + ": schema_json and grammar must be given");
        }
        *grammar = nullptr;
        *grammar = handed_out(chat_up::schema_to_grammar(schema_json));
        return ok();
    });
}

void llama_mtp_string_free(char * text) {
    std::free(text);
}

}  // extern "C"
