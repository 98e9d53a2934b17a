#include "cli/miss_hint.hpp"

namespace opcache::cli {

void note_near_entries(const Context& context, Store& store, const std::string& op_type, const std::string& key,
                       const std::string& arguments) {
  if (op_type.empty()) {
    return;
  }
  ListFilter filter;
  filter.op_type = op_type;
  filter.limit = 2;  // the entry just built may be one of them
  auto entries = store.list(filter);
  if (!entries) {
    return;
  }
  for (const auto& entry : *entries) {
    if (entry.key != key) {
      context.note("note: other entries of op type " + op_type + " are stored: `opcache explain` with the same " +
                   arguments + " shows how they differ");
      return;
    }
  }
}

}  // namespace opcache::cli
