// Status and Result<T>: how replayssm reports recoverable failures.
//
// A bad file, bad config, bad request or exhausted budget is not a bug: it is
// returned to the caller as a Status whose message names the file, field or
// value at fault, so a CLI can print one line and exit non-zero. Broken
// internal invariants are bugs and abort instead (see RSSM_CHECK in
// src/core/check.h). C++20 has no std::expected, hence this small pair.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace replayssm {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // a request or option is out of range
  kNotFound,         // a file or tensor is missing
  kCorrupt,          // a file exists but its contents are inconsistent
  kUnsupported,      // valid input that this version cannot run
  kOutOfBudget,      // a request does not fit its memory budget
  kIoError,          // the OS refused an operation
};

// Thread-compatible value type. An ok Status carries no message.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status out_of_budget(std::string m) { return {StatusCode::kOutOfBudget, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }

// Either a T or a non-ok Status. value() on an error aborts: callers check ok().
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {          // NOLINT
    if (std::get<Status>(v_).ok()) std::abort();            // an ok Status carries no value
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { check(); return std::get<T>(v_); }
  const T& value() const& { check(); return std::get<T>(v_); }
  // By value from a temporary, so `for (x : f().value())` does not dangle.
  T value() && { check(); return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T operator*() && { return std::move(*this).value(); }

 private:
  void check() const { if (!ok()) std::abort(); }
  std::variant<T, Status> v_;
};

}  // namespace replayssm

// Propagate a non-ok Status from an expression returning Status.
#define RSSM_RETURN_IF_ERROR(expr)                       \
  do {                                                   \
    ::replayssm::Status rssm_status_ = (expr);           \
    if (!rssm_status_.ok()) return rssm_status_;         \
  } while (0)

#define RSSM_CONCAT_INNER_(a, b) a##b
#define RSSM_CONCAT_(a, b) RSSM_CONCAT_INNER_(a, b)

// `RSSM_ASSIGN_OR_RETURN(auto x, f());` — bind the value or return the error.
#define RSSM_ASSIGN_OR_RETURN(lhs, expr) \
  RSSM_ASSIGN_OR_RETURN_IMPL_(RSSM_CONCAT_(rssm_result_, __LINE__), lhs, expr)
#define RSSM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
