#include "trace/seccomp_filter.hpp"

#include <endian.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "trace/preload/preload_abi.hpp"
#include "trace/syscall_table.hpp"

namespace opcache::trace {

namespace {

constexpr std::uint32_t k_arch_offset = offsetof(seccomp_data, arch);
constexpr std::uint32_t k_number_offset = offsetof(seccomp_data, nr);
constexpr std::uint32_t k_pointer_offset = offsetof(seccomp_data, instruction_pointer);

// The offset of the low 32 bits of argument `index` (the filter reads 32-bit words).
std::uint32_t argument_low_word_offset(int index) {
  const auto offset = static_cast<std::uint32_t>(offsetof(seccomp_data, args) + 8 * static_cast<unsigned>(index));
#if __BYTE_ORDER == __LITTLE_ENDIAN
  return offset;
#else
  return offset + 4;
#endif
}

sock_filter load_word(std::uint32_t offset) {
  return BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset);
}

sock_filter jump_if_equal(std::uint32_t value, std::uint8_t if_true, std::uint8_t if_false) {
  return BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, if_true, if_false);
}

sock_filter jump_if_any_bit(std::uint32_t bits, std::uint8_t if_true, std::uint8_t if_false) {
  return BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, bits, if_true, if_false);
}

sock_filter return_trace(FilterVerdict verdict) {
  return BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE | static_cast<std::uint32_t>(verdict));
}

// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19), for headers older than it.
#ifdef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
constexpr unsigned k_wait_killable_recv = SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
#else
constexpr unsigned k_wait_killable_recv = 1U << 5;
#endif

// The verdict of a call that names a file, native convention.
sock_filter return_path_call(TraceMechanism mechanism) {
  if (mechanism == TraceMechanism::user_notification) {
    return BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
  }
  return return_trace(FilterVerdict::path_call);
}

sock_filter return_allow() {
  return BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
}

// The offsets of the low and high 32 bits of the call's instruction pointer.
std::uint32_t pointer_low_word_offset() {
#if __BYTE_ORDER == __LITTLE_ENDIAN
  return k_pointer_offset;
#else
  return k_pointer_offset + 4;
#endif
}

std::uint32_t pointer_high_word_offset() {
#if __BYTE_ORDER == __LITTLE_ENDIAN
  return k_pointer_offset + 4;
#else
  return k_pointer_offset;
#endif
}

// A native call made from the preload library's one `syscall` instruction
// is allowed when it is one the library makes there: an openat that neither
// writes, creates, truncates nor opens O_PATH (the library checks the same),
// a newfstatat or a faccessat (without flags: faccessat2 is never made
// there). Anything else made there falls through to the rules below, as from
// anywhere else.
void append_unnotified_page(std::vector<sock_filter>& code) {
  const std::uint64_t pointer = preload::k_trampoline_address + preload::k_trampoline_return_offset;
  // Each jump counts the instructions it skips; all misses land after the block (12 instructions).
  code.push_back(load_word(pointer_high_word_offset()));                             // 0
  code.push_back(jump_if_equal(static_cast<std::uint32_t>(pointer >> 32), 0, 10));  // 1
  code.push_back(load_word(pointer_low_word_offset()));                              // 2
  code.push_back(jump_if_equal(static_cast<std::uint32_t>(pointer), 0, 8));         // 3
  code.push_back(load_word(k_number_offset));                                        // 4
  code.push_back(jump_if_equal(static_cast<std::uint32_t>(SYS_openat), 0, 3));      // 5
  code.push_back(load_word(argument_low_word_offset(2)));                            // 6
  code.push_back(jump_if_any_bit(preload::k_unnotified_open_refused_flags, 4, 0));  // 7
  code.push_back(return_allow());                                                    // 8
  code.push_back(jump_if_equal(static_cast<std::uint32_t>(SYS_newfstatat), 1, 0));  // 9
  code.push_back(jump_if_equal(static_cast<std::uint32_t>(SYS_faccessat), 0, 1));   // 10
  code.push_back(return_allow());                                                    // 11
}

// Any call made with another convention than the native one is reported, as
// is an x32 call; then the preload library's page, when allowed; the number
// is left in the accumulator.
void append_prologue(std::vector<sock_filter>& code, bool unnotified_page) {
  code.push_back(load_word(k_arch_offset));
  code.push_back(jump_if_equal(native_audit_arch(), 1, 0));
  code.push_back(return_trace(FilterVerdict::foreign_arch));
  if (unnotified_page) {
    append_unnotified_page(code);
  }
  code.push_back(load_word(k_number_offset));
  if (x32_syscall_bit() != 0) {
    code.push_back(jump_if_any_bit(x32_syscall_bit(), 0, 1));
    code.push_back(return_trace(FilterVerdict::x32_call));
  }
}

// With the number in the accumulator: a match returns (so a rule may clobber
// it), a miss falls through to the next rule.
void append_rule(std::vector<sock_filter>& code, const SyscallRule& rule, TraceMechanism mechanism) {
  const auto number = static_cast<std::uint32_t>(rule.number);
  if (rule.untraced_flag == 0) {
    code.push_back(jump_if_equal(number, 0, 1));
    code.push_back(return_path_call(mechanism));
    return;
  }
  code.push_back(jump_if_equal(number, 0, 4));
  code.push_back(load_word(argument_low_word_offset(rule.flags_argument)));
  code.push_back(jump_if_any_bit(rule.untraced_flag, 0, 1));
  code.push_back(return_allow());
  code.push_back(return_path_call(mechanism));
}

// seccomp(2) SECCOMP_SET_MODE_FILTER with `flags`: a listener descriptor
// (SECCOMP_FILTER_FLAG_NEW_LISTENER), 0, or -1 with errno set.
int set_mode_filter(unsigned flags, const sock_fprog& program) noexcept {
  return static_cast<int>(::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &program));
}

}  // namespace

SeccompFilter::SeccompFilter(TraceMechanism mechanism, bool unnotified_page)
    : m_mechanism(mechanism), m_unnotified_page(unnotified_page) {
  append_prologue(m_code, unnotified_page);
  for (const auto& rule : traced_syscalls()) {
    append_rule(m_code, rule, mechanism);
  }
  m_code.push_back(return_allow());
  m_program.len = static_cast<unsigned short>(m_code.size());
  m_program.filter = m_code.data();
}

int SeccompFilter::install(int& listener) const noexcept {
  const unsigned flags = m_mechanism == TraceMechanism::user_notification
                            ? unsigned{SECCOMP_FILTER_FLAG_NEW_LISTENER | k_wait_killable_recv}
                            : 0U;
  listener = set_mode_filter(flags | SECCOMP_FILTER_FLAG_SPEC_ALLOW, m_program);
  if (listener < 0 && errno == EINVAL) {  // a kernel older than SECCOMP_FILTER_FLAG_SPEC_ALLOW
    listener = set_mode_filter(flags, m_program);
  }
  if (listener < 0) {
    return errno;
  }
  if (flags == 0) {
    listener = -1;
  }
  return 0;
}

}  // namespace opcache::trace
