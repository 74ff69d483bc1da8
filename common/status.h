// Status helpers shared by every library. Everything a caller can cause or
// recover from returns absl::Status / absl::StatusOr; only server/ converts
// to grpc::Status.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define OASR_STATUS_CONCAT_INNER_(a, b) a##b
#define OASR_STATUS_CONCAT_(a, b) OASR_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function when it is not OK.
#define OASR_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::absl::Status oasr_status_ = (expr);           \
    if (!oasr_status_.ok()) return oasr_status_;    \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from
// the enclosing function, otherwise moves the value into `lhs`, which may be a
// declaration (`auto x`) or an existing variable.
#define OASR_ASSIGN_OR_RETURN(lhs, rexpr) \
  OASR_ASSIGN_OR_RETURN_IMPL_(OASR_STATUS_CONCAT_(oasr_statusor_, __LINE__), lhs, rexpr)

#define OASR_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
