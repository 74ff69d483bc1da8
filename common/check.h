// CHECK-style macros for broken invariants only (programming errors inside
// the server). They log file:line and the failed condition, then abort.
// Anything a caller can cause returns an absl::Status instead.
//
// This header is deliberately free of spdlog/fmt so that .cu files can use it.
#pragma once

#include <string>

namespace oasr::internal {

// Logs "file:line: Check failed: expr (message)" and aborts. Never returns.
[[noreturn]] void CheckFailed(const char* file, int line, const char* expr,
                              const std::string& message);

}  // namespace oasr::internal

// OASR_CHECK(cond) or OASR_CHECK(cond, "message").
#define OASR_CHECK(cond, ...)                                                    \
  do {                                                                           \
    if (__builtin_expect(!(cond), 0)) {                                          \
      ::oasr::internal::CheckFailed(__FILE__, __LINE__, #cond,                   \
                                    ::std::string(__VA_OPT__(__VA_ARGS__)));     \
    }                                                                            \
  } while (false)

#define OASR_CHECK_OP_(a, op, b)                                                 \
  do {                                                                           \
    const auto& oasr_a_ = (a);                                                   \
    const auto& oasr_b_ = (b);                                                   \
    if (__builtin_expect(!(oasr_a_ op oasr_b_), 0)) {                            \
      ::oasr::internal::CheckFailed(                                             \
          __FILE__, __LINE__, #a " " #op " " #b,                                 \
          ::std::to_string(oasr_a_) + " vs " + ::std::to_string(oasr_b_));       \
    }                                                                            \
  } while (false)

#define OASR_CHECK_EQ(a, b) OASR_CHECK_OP_(a, ==, b)
#define OASR_CHECK_NE(a, b) OASR_CHECK_OP_(a, !=, b)
#define OASR_CHECK_LT(a, b) OASR_CHECK_OP_(a, <, b)
#define OASR_CHECK_LE(a, b) OASR_CHECK_OP_(a, <=, b)
#define OASR_CHECK_GT(a, b) OASR_CHECK_OP_(a, >, b)
#define OASR_CHECK_GE(a, b) OASR_CHECK_OP_(a, >=, b)

// Checks only in debug builds; for per-element invariants on hot paths.
#ifdef NDEBUG
#define OASR_DCHECK(cond, ...) \
  do {                         \
  } while (false && (cond))
#else
#define OASR_DCHECK(cond, ...) OASR_CHECK(cond __VA_OPT__(, ) __VA_ARGS__)
#endif
