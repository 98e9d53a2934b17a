#include "cli/descriptor_input.hpp"

#include "base/try.hpp"

namespace opcache::cli {

Result<DescriptorInput> open_descriptor_input(const Context& context, const ScenarioOption& scenario,
                                              const std::string& desc_path, DescriptorCheck check) {
  OPCACHE_TRY_ASSIGN(auto resolved, scenario.resolve());
  OPCACHE_TRY_ASSIGN(auto text, read_descriptor_text(desc_path));
  OPCACHE_TRY_ASSIGN(auto store, context.open_store());
  if (check == DescriptorCheck::by_store) {
    return DescriptorInput{std::move(resolved), std::move(text), {}, std::move(store)};
  }
  auto canonical = store.canonical_descriptor(text);
  if (!canonical) {
    return canonical.error().with_context(desc_path);
  }
  return DescriptorInput{std::move(resolved), std::move(text), std::move(*canonical), std::move(store)};
}

}  // namespace opcache::cli
