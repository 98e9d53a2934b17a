// Clang's thread-safety annotations (-Wthread-safety), as LevelDB and Abseil
// spell them. Under clang they expand to the attributes the analysis reads;
// under any other compiler (the product's gcc build) to nothing.
//
// Use them on the members of a class that threads share:
//   base::Mutex m_mutex;
//   int m_count GUARDED_BY(m_mutex);          // read or written only under m_mutex
//   void bump_locked() REQUIRES(m_mutex);     // callers hold m_mutex
//   void publish() EXCLUDES(m_mutex);         // takes m_mutex itself
// scripts/check_thread_safety.py (CTest architecture.thread_safety) compiles
// the product with clang++-14 -Wthread-safety -Werror=thread-safety, and
// fails on a bare std::mutex (or other standard lock) outside base/mutex.hpp.
#pragma once

#if defined(__clang__)
#define OPCACHE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define OPCACHE_THREAD_ANNOTATION(x)
#endif

/// On a class: its objects are capabilities (locks) the analysis tracks.
#define CAPABILITY(name) OPCACHE_THREAD_ANNOTATION(capability(name))
/// On a class: an RAII object that holds a capability for its lifetime.
#define SCOPED_CAPABILITY OPCACHE_THREAD_ANNOTATION(scoped_lockable)
/// On a data member: read and written only while holding `x`.
#define GUARDED_BY(x) OPCACHE_THREAD_ANNOTATION(guarded_by(x))
/// On a pointer member: what it points to is read and written only while holding `x`.
#define PT_GUARDED_BY(x) OPCACHE_THREAD_ANNOTATION(pt_guarded_by(x))
/// On a function: callers must hold the capabilities (exclusively).
#define REQUIRES(...) OPCACHE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
/// On a function: callers must not hold the capabilities (the function takes them).
#define EXCLUDES(...) OPCACHE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
/// On a function: it acquires the capabilities (or `this`, with no argument) and returns holding them.
#define ACQUIRE(...) OPCACHE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
/// On a function: it releases the capabilities (or `this`, with no argument).
#define RELEASE(...) OPCACHE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
/// On a function: it returns `b` when it acquired the capabilities, and then holds them.
#define TRY_ACQUIRE(...) OPCACHE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
/// On a function: it fails (aborts) unless the caller holds the capability.
#define ASSERT_CAPABILITY(x) OPCACHE_THREAD_ANNOTATION(assert_capability(x))
/// On a function: it returns a reference to the capability `x`.
#define RETURN_CAPABILITY(x) OPCACHE_THREAD_ANNOTATION(lock_returned(x))
/// On a function: the analysis skips its body. Say why next to each use.
#define NO_THREAD_SAFETY_ANALYSIS OPCACHE_THREAD_ANNOTATION(no_thread_safety_analysis)
