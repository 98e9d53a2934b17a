// Early-return helpers for `Result` (internal; not part of the public API).
#pragma once

#include "opcache/result.hpp"

#define OPCACHE_CONCAT_INNER(a, b) a##b
#define OPCACHE_CONCAT(a, b) OPCACHE_CONCAT_INNER(a, b)

/// Evaluates `expr` (a Result or Status); returns its error from the caller on failure.
#define OPCACHE_TRY(expr)                          \
  do {                                             \
    auto&& opcache_try_result_ = (expr);           \
    if (!opcache_try_result_) {                    \
      return opcache_try_result_.error();          \
    }                                              \
  } while (false)

/// `OPCACHE_TRY_ASSIGN(auto x, f())`: declares/assigns the value of `f()` or returns its error.
#define OPCACHE_TRY_ASSIGN(lhs, expr) \
  OPCACHE_TRY_ASSIGN_IMPL(OPCACHE_CONCAT(opcache_try_tmp_, __LINE__), lhs, expr)
#define OPCACHE_TRY_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                            \
  if (!tmp) {                                   \
    return tmp.error();                         \
  }                                             \
  lhs = std::move(tmp).value()
