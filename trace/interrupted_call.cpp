#include "trace/interrupted_call.hpp"

#include <sys/ptrace.h>
#include <sys/user.h>

#include <cstddef>

#include "trace/preload/preload_abi.hpp"

namespace opcache::trace {

namespace {

// The signature of a stop's call.
CallSignature signature_of(const SyscallStop& stop) {
  return CallSignature{stop.number, stop.arguments, stop.instruction_pointer};
}

}  // namespace

#if defined(__x86_64__)

namespace {

// Linux's restart codes (include/linux/errno.h: not in the UAPI headers).
constexpr long k_restart_if_sa_restart = 512;  // ERESTARTSYS
constexpr long k_restart_always = 513;         // ERESTARTNOINTR

// The code segment selector of a 64-bit thread (__USER_CS); 32-bit threads
// use another, and their calls are not notified.
constexpr unsigned long long k_user_code_segment_64 = 0x33;

// Whether a call returning to `instruction_pointer` was made from the
// preload library's page: the filter let it through, never notified, so an
// -ERESTARTSYS is its own (a FIFO's open that waited), as untraced.
bool made_by_preload_library(std::uint64_t instruction_pointer) {
  return instruction_pointer == preload::k_trampoline_address + preload::k_trampoline_return_offset;
}

}  // namespace

bool can_restart_interrupted_calls() { return true; }

std::optional<CallSignature> interrupted_call(pid_t tid) {
  user_regs_struct registers{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &registers) != 0) {
    return std::nullopt;  // ESRCH: gone
  }
  const auto returned = static_cast<long long>(registers.rax);
  if (registers.cs != k_user_code_segment_64 || static_cast<long long>(registers.orig_rax) < 0 ||
      returned != -k_restart_if_sa_restart || made_by_preload_library(registers.rip)) {
    return std::nullopt;
  }
  return CallSignature{registers.orig_rax,
                       {registers.rdi, registers.rsi, registers.rdx, registers.r10, registers.r8, registers.r9},
                       registers.rip};
}

bool restart_interrupted_call(pid_t tid) {
  const long restart_always = -k_restart_always;
  return ::ptrace(PTRACE_POKEUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rax)),
                  reinterpret_cast<void*>(restart_always)) == 0;
}

#else

bool can_restart_interrupted_calls() { return false; }

std::optional<CallSignature> interrupted_call(pid_t) { return std::nullopt; }

bool restart_interrupted_call(pid_t) { return false; }

#endif

void ReceivedCalls::record(const SyscallStop& stop) {
  base::MutexLock lock(m_mutex);
  m_last[stop.tid] = signature_of(stop);
}

bool ReceivedCalls::take_if_received(pid_t tid, const CallSignature& call) {
  base::MutexLock lock(m_mutex);
  const auto last = m_last.find(tid);
  if (last == m_last.end()) {
    return false;
  }
  const bool received = last->second == call;
  m_last.erase(last);
  return received;
}

void ReceivedCalls::forget(pid_t tid) {
  base::MutexLock lock(m_mutex);
  m_last.erase(tid);
}

}  // namespace opcache::trace
