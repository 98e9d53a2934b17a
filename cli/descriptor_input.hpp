// The common start of `opcache key`, `put` and `exec`: resolve the scenario,
// read the descriptor, open the store and check the descriptor.
#pragma once

#include <string>

#include "cli/context.hpp"
#include "opcache/opcache.hpp"

namespace opcache::cli {

/// A descriptor ready to be keyed in an open store.
struct DescriptorInput {
  Scenario scenario;
  std::string text;       ///< the descriptor as read from --desc
  std::string canonical;  ///< Store::canonical_descriptor(text): checked, volatile fields removed (DescriptorCheck::now)
  Store store;            ///< the store of the global options
};

/// Who checks the descriptor that open_descriptor_input reads.
enum class DescriptorCheck {
  now,       ///< open_descriptor_input itself, which sets `canonical`
  by_store,  ///< the Store call the text goes to, which names its origin (Store::exec); `canonical` stays empty
};

/// Resolves `scenario`, reads the descriptor at `desc_path` ('-' is standard
/// input), opens the store and (DescriptorCheck::now) checks the descriptor,
/// in that order. The first failure is returned; a bad descriptor's error
/// names `desc_path`. The caller owns the returned store.
Result<DescriptorInput> open_descriptor_input(const Context& context, const ScenarioOption& scenario,
                                              const std::string& desc_path,
                                              DescriptorCheck check = DescriptorCheck::now);

}  // namespace opcache::cli
