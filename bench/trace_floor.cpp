// bench_trace_floor: a command run under the tracer `opcache exec` runs a
// miss under, and nothing else, for bench/run's miss scenario to put beside
// the traced miss (issue 36: "the tracer adds at most 5 % to a miss").
//
//   bench_trace_floor CMD ARGS...
//
// It calls trace::run_traced as exec does: the default mechanism, the
// preload library (found beside this program, or where
// OPCACHE_TRACE_PRELOAD names it), every event of the whole tree recorded.
// What it leaves out is everything exec does beyond the trace: its options
// and settings, the command key, the lookup, the single-flight lock, turning
// events into inputs and digesting them, the bundle, the index and the exec
// manifest. It exits with the command's status, 3 when the trace was
// partial (a floor that did not trace would flatter the tracer), and 2 when
// the command could not be traced at all; it prints nothing otherwise.
#include <cstdio>
#include <string>

#include "trace/process_tracer.hpp"

namespace {

// The one-line reason this run cannot stand for a traced miss, or empty.
std::string unfit_trace(const opcache::trace::TraceOutcome& outcome) {
  if (outcome.blind) {
    return "the trace was partial: " + *outcome.blind;
  }
  if (outcome.events.empty()) {
    return "the trace recorded nothing";
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_trace_floor CMD ARGS...\n");
    return 2;
  }
  opcache::trace::TraceRequest request;
  request.argv.assign(argv + 1, argv + argc);
  const auto outcome = opcache::trace::run_traced(request);
  if (!outcome) {
    std::fprintf(stderr, "bench_trace_floor: %s\n", outcome.error().message().c_str());
    return 2;
  }
  if (const auto reason = unfit_trace(*outcome); !reason.empty()) {
    std::fprintf(stderr, "bench_trace_floor: %s\n", reason.c_str());
    return 3;
  }
  return outcome->status;
}
