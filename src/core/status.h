// Status and Result<T>: how meshrl reports failures that are normal (files, config, network, peers).
// Owns nothing; knows nothing about tensors or the network. Broken invariants inside math code use
// MESHRL_CHECK (check.h) instead and stop loudly.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace meshrl {

enum class StatusCode { kOk = 0, kInvalidArgument, kNotFound, kIoError, kDataLoss, kUnimplemented, kInternal };

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }

// Thrown only by Result::value() on an error, i.e. a caller that skipped the check.
struct StatusError : std::runtime_error {
  explicit StatusError(const Status& s) : std::runtime_error(s.message()), status(s) {}
  Status status;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                 // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {           // NOLINT
    if (std::get<Status>(v_).is_ok()) v_ = Status(StatusCode::kInternal, "Result built from an ok Status");
  }
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    if (!is_ok()) throw StatusError(std::get<Status>(v_));
    return std::get<T>(v_);
  }
  T&& value() && {
    if (!is_ok()) throw StatusError(std::get<Status>(v_));
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace meshrl

// Propagate a failed Status / Result from the current function.
#define MESHRL_RETURN_IF_ERROR(expr)              \
  do {                                            \
    auto _st = (expr);                            \
    if (!_st.is_ok()) return _st;                 \
  } while (0)

#define MESHRL_CONCAT_INNER(a, b) a##b
#define MESHRL_CONCAT(a, b) MESHRL_CONCAT_INNER(a, b)
#define MESHRL_ASSIGN_OR_RETURN(lhs, expr) MESHRL_ASSIGN_OR_RETURN_IMPL(MESHRL_CONCAT(_res_, __LINE__), lhs, expr)
#define MESHRL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.is_ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
