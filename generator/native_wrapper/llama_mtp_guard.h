// What every C ABI file of the wrapper shares: the registry of live handles (a freed or foreign
// pointer is refused without being dereferenced) and the guard that turns every C++ exception
// into a status with its message (llama_mtp_last_error).

#pragma once

#include "llama_mtp.h"
#include "llama_mtp_strategies.h"

#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>

namespace llama_mtp_impl {

// The live handles of one kind.
template <typename T> class live_set {
  public:
    void add(const T * h) {
        std::lock_guard<std::mutex> lock(mutex_);
        set_.insert(h);
    }
    bool remove(const T * h) {
        std::lock_guard<std::mutex> lock(mutex_);
        return set_.erase(h) == 1;
    }
    bool contains(const T * h) {
        std::lock_guard<std::mutex> lock(mutex_);
        return set_.count(h) == 1;
    }

  private:
    std::mutex mutex_;
    std::unordered_set<const T *> set_;
};

// body()'s status; an exception escaping it becomes INTERNAL_ERROR with `where` and its message.
template <typename F> llama_mtp_status guarded(const char * where, F && body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR, std::string(where) + ": out of memory");
    } catch (const std::exception & e) {
        return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR, std::string(where) + ": " + e.what());
    } catch (...) {
        return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR, std::string(where) + ": unknown exception");
    }
}

}  // namespace llama_mtp_impl
