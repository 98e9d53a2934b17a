// The C ABI (include/opcache/opcache.h): converts to and from the C++ API and
// turns every failure, including exceptions, into a status code.
#include "opcache/opcache.h"

#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "opcache/opcache.hpp"

struct opcache_store {
  opcache::Store store;
};

namespace {

thread_local std::string t_last_error;

opcache_status fail(const opcache::Error& error) {
  t_last_error = error.message();
  return static_cast<opcache_status>(error.code());
}

opcache_status fail_usage(const char* message) {
  t_last_error = message;
  return OPCACHE_USAGE;
}

// Runs `body`, mapping exceptions (allocation failure, bugs) to statuses so
// none crosses the C boundary.
template <typename Body>
opcache_status guarded(Body&& body) noexcept {
  try {
    t_last_error.clear();
    return body();
  } catch (const std::bad_alloc&) {
    t_last_error = "out of memory";
    return OPCACHE_INTERNAL;
  } catch (const std::exception& e) {
    t_last_error = std::string("internal error: ") + e.what();
    return OPCACHE_INTERNAL;
  } catch (...) {
    t_last_error = "internal error: unknown exception";
    return OPCACHE_INTERNAL;
  }
}

void copy_key(const std::string& key, char* key_out) {
  if (key_out != nullptr) {
    std::memcpy(key_out, key.c_str(), key.size() + 1);
  }
}

}  // namespace

extern "C" {

const char* opcache_version(void) { return opcache::k_version_string; }

const char* opcache_status_name(opcache_status status) {
  if (status == OPCACHE_OK) {
    return "ok";
  }
  if (status < OPCACHE_NOT_FOUND || status > OPCACHE_INTERNAL) {
    return "unknown";
  }
  return opcache::error_code_name(static_cast<opcache::ErrorCode>(status));
}

const char* opcache_last_error(void) { return t_last_error.c_str(); }

opcache_status opcache_open(const char* cache_dir, opcache_store** out) {
  return guarded([&] {
    if (out == nullptr) {
      return fail_usage("opcache_open: out must not be NULL");
    }
    *out = nullptr;
    opcache::StoreConfig config;
    if (cache_dir != nullptr) {
      config.cache_dir = cache_dir;
    }
    auto store = opcache::Store::open(config);
    if (!store) {
      return fail(store.error());
    }
    *out = new opcache_store{std::move(*store)};
    return OPCACHE_OK;
  });
}

void opcache_close(opcache_store* store) { delete store; }

opcache_status opcache_key(opcache_store* store, const char* descriptor_json, const char* scenario, char* key_out) {
  return guarded([&] {
    if (store == nullptr || descriptor_json == nullptr || scenario == nullptr || key_out == nullptr) {
      return fail_usage("opcache_key: store, descriptor_json, scenario and key_out must not be NULL");
    }
    auto parsed = opcache::parse_scenario(scenario);
    if (!parsed) {
      return fail(parsed.error());
    }
    auto key = store->store.key(descriptor_json, *parsed);
    if (!key) {
      return fail(key.error());
    }
    copy_key(*key, key_out);
    return OPCACHE_OK;
  });
}

opcache_status opcache_put(opcache_store* store, const char* descriptor_json, const char* scenario,
                           const char* const* files, size_t file_count, int64_t build_ms, char* key_out) {
  return guarded([&] {
    if (store == nullptr || descriptor_json == nullptr || scenario == nullptr || (files == nullptr && file_count)) {
      return fail_usage("opcache_put: store, descriptor_json, scenario and files must not be NULL");
    }
    auto parsed = opcache::parse_scenario(scenario);
    if (!parsed) {
      return fail(parsed.error());
    }
    std::vector<std::filesystem::path> paths;
    for (size_t i = 0; i < file_count; ++i) {
      if (files[i] == nullptr) {
        return fail_usage("opcache_put: files contains a NULL entry");
      }
      paths.emplace_back(files[i]);
    }
    opcache::PutOptions options;
    options.build_ms = build_ms;
    auto result = store->store.put(descriptor_json, *parsed, paths, options);
    if (!result) {
      return fail(result.error());
    }
    copy_key(result->key, key_out);
    return OPCACHE_OK;
  });
}

opcache_status opcache_get(opcache_store* store, const char* key, const char* out_dir) {
  return guarded([&] {
    if (store == nullptr || key == nullptr || out_dir == nullptr) {
      return fail_usage("opcache_get: store, key and out_dir must not be NULL");
    }
    auto result = store->store.get(key, out_dir);
    if (!result) {
      return fail(result.error());
    }
    if (!*result) {
      t_last_error = std::string("no entry for key ") + key;
      return OPCACHE_NOT_FOUND;
    }
    return OPCACHE_OK;
  });
}

opcache_status opcache_has(opcache_store* store, const char* key) {
  return guarded([&] {
    if (store == nullptr || key == nullptr) {
      return fail_usage("opcache_has: store and key must not be NULL");
    }
    auto result = store->store.contains(key);
    if (!result) {
      return fail(result.error());
    }
    return *result ? OPCACHE_OK : OPCACHE_NOT_FOUND;
  });
}

opcache_status opcache_remove(opcache_store* store, const char* key) {
  return guarded([&] {
    if (store == nullptr || key == nullptr) {
      return fail_usage("opcache_remove: store and key must not be NULL");
    }
    auto result = store->store.remove(key);
    if (!result) {
      return fail(result.error());
    }
    return *result ? OPCACHE_OK : OPCACHE_NOT_FOUND;
  });
}

opcache_status opcache_get_or_build(opcache_store* store, const char* descriptor_json, const char* scenario,
                                    const char* out_dir, opcache_build_fn build, void* user_data,
                                    opcache_source* source_out) {
  return guarded([&] {
    if (store == nullptr || descriptor_json == nullptr || scenario == nullptr || out_dir == nullptr ||
        build == nullptr) {
      return fail_usage("opcache_get_or_build: store, descriptor_json, scenario, out_dir and build must not be NULL");
    }
    auto parsed = opcache::parse_scenario(scenario);
    if (!parsed) {
      return fail(parsed.error());
    }
    auto callback = [&](const std::filesystem::path& work_dir) -> opcache::Status {
      int rc = build(work_dir.c_str(), user_data);
      if (rc != 0) {
        return opcache::Error::build_failed("the build callback returned " + std::to_string(rc));
      }
      return {};
    };
    auto result = store->store.get_or_build(descriptor_json, *parsed, out_dir, callback);
    if (!result) {
      return fail(result.error());
    }
    if (source_out != nullptr) {
      *source_out = result->source == opcache::BuildSource::hit     ? OPCACHE_SOURCE_HIT
                    : result->source == opcache::BuildSource::built ? OPCACHE_SOURCE_BUILT
                                                                    : OPCACHE_SOURCE_BYPASSED;
    }
    return OPCACHE_OK;
  });
}

}  // extern "C"
