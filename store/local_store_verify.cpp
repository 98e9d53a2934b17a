// LocalStore::verify (declared in store/local_store.hpp): every entry's
// object decoded and checked, key records against the index, orphan objects
// and stale temp files, each repaired on request.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "base/sha256.hpp"
#include "base/try.hpp"
#include "store/key.hpp"
#include "store/local_store.hpp"

namespace opcache::store {

namespace {

// Temp files of a live process are left alone unless this old.
constexpr auto k_stale_temp_age = std::chrono::hours(24);

bool older_than(const std::filesystem::path& path, std::chrono::seconds age) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    return false;
  }
  return std::time(nullptr) - info.st_mtime > age.count();
}

}  // namespace

Result<VerifyReport> LocalStore::verify(bool repair) {
  VerifyReport report;
  verify_entries(repair, report);
  verify_key_records(repair, report);
  verify_objects(repair, report);
  verify_temps(repair, report);
  return report;
}

void LocalStore::verify_entries(bool repair, VerifyReport& report) {
  std::vector<IndexEntry> entries;
  {
    base::MutexLock lock(m_index_mutex);
    auto status = open_index();
    if (status) {
      status = m_index->for_each([&entries](const IndexEntry& entry) {
        entries.push_back(entry);
        return true;
      });
    }
    if (!status) {
      report.problems.push_back({"index_unreadable", m_layout.index().string(), status.error().message(), false});
      return;
    }
  }
  for (const auto& entry : entries) {
    ++report.entries_checked;
    auto object = m_layout.object_path(entry.digest);
    auto fd = base::open_for_reading(object, /*follow_symlinks=*/false);
    std::optional<VerifyProblem> problem;
    if (!fd) {
      problem = VerifyProblem{"missing_object", entry.key, fd.error().message(), false};
    } else {
      base::FdSource source(fd->get(), object);
      auto decoded = recheck_object(source, entry);
      report.bytes_checked += entry.bundle_size;
      if (!decoded) {
        problem = VerifyProblem{"corrupt_entry", entry.key, decoded.error().message(), false};
      }
    }
    if (!problem) {
      continue;
    }
    if (repair && (problem->kind == "corrupt_entry" || fd.error().code() == ErrorCode::not_found)) {
      bool removed = false;
      erase_key_records({entry.key});  // before the row (see remove())
      {
        base::MutexLock lock(m_index_mutex);
        auto transaction = m_index->begin();  // open: verify_entries read it
        removed = transaction && m_index->remove(entry.key, entry.digest) && transaction->commit();
      }
      // The row first, then the object (see remove()).
      problem->repaired = removed && retire_objects({entry.digest});
    }
    report.problems.push_back(*problem);
  }
}

void LocalStore::verify_key_records(bool repair, VerifyReport& report) {
  std::error_code ec;
  for (const auto& shard : std::filesystem::directory_iterator(m_layout.keys(), ec)) {
    for (const auto& file : std::filesystem::directory_iterator(shard.path(), ec)) {
      const std::string name = file.path().filename().string();
      if (!check_key(name) || name.compare(0, 2, shard.path().filename().string()) != 0) {
        report.problems.push_back({"unexpected_file", file.path().string(), "not a key record name", false});
        continue;
      }
      auto row = find(name);
      if (!row) {
        continue;  // verify_entries reported the index
      }
      const auto record = m_keys.read(name);
      if (record && *row && record->digest == (*row)->digest) {
        continue;
      }
      VerifyProblem problem{"stale_key_record", name,
                            !*row      ? "the index has no entry for this key"
                            : !record ? "unreadable or of another format"
                                      : "names object " + record->digest + ", the index " + (*row)->digest,
                            false};
      if (repair) {
        problem.repaired = *row ? static_cast<bool>(m_keys.write(**row)) : static_cast<bool>(m_keys.erase(name));
      }
      report.problems.push_back(problem);
    }
  }
}

void LocalStore::verify_objects(bool repair, VerifyReport& report) {
  std::error_code ec;
  for (const auto& shard : std::filesystem::directory_iterator(m_layout.objects(), ec)) {
    for (const auto& file : std::filesystem::directory_iterator(shard.path(), ec)) {
      ++report.objects_checked;
      std::string name = file.path().filename().string();
      if (!base::is_sha256_hex(name) || name.compare(0, 2, shard.path().filename().string()) != 0) {
        report.problems.push_back({"unexpected_file", file.path().string(), "not a bundle object name", false});
        continue;
      }
      base::MutexLock lock(m_index_mutex);
      if (!open_index()) {
        continue;  // verify_entries reported it
      }
      auto referenced = m_index->digest_referenced(name);
      if (!referenced || *referenced) {
        continue;
      }
      VerifyProblem problem{"orphan_object", name, "no index row refers to this object", false};
      if (repair) {
        // Re-checked inside a write transaction: a put that publishes this
        // object right now relinks it from its temp file if it finds it gone.
        auto transaction = m_index->begin();
        problem.repaired = transaction && unlink_if_unreferenced(name) && transaction->commit();
      }
      report.problems.push_back(problem);
    }
  }
}

void LocalStore::verify_temps(bool repair, VerifyReport& report) {
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(m_layout.tmp(), ec)) {
    std::string name = file.path().filename().string();
    long pid = base::temp_file_owner_pid(name);
    bool stale = (pid > 0 && !base::process_alive(pid)) ||
                 older_than(file.path(), std::chrono::duration_cast<std::chrono::seconds>(k_stale_temp_age));
    if (!stale) {
      continue;
    }
    VerifyProblem problem{"stale_temp", name,
                          pid > 0 && !base::process_alive(pid) ? "left by process " + std::to_string(pid) + ", which is gone"
                                                         : "older than 24 hours",
                          false};
    if (repair) {
      problem.repaired = ::unlink(file.path().c_str()) == 0;
    }
    report.problems.push_back(problem);
  }
}

}  // namespace opcache::store
