#include "store/bundle_writer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include <zstd.h>

#include "opcache/version.hpp"
#include "base/canonical_json.hpp"
#include "base/file_io.hpp"
#include "store/key.hpp"
#include "base/try.hpp"

namespace opcache::store {

namespace {

using CCtxPtr = std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)>;

void put_u32_le(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) {
    return {};
  }
  return buffer;
}

// An opened member file and what pass 1 learnt about it.
struct OpenMember {
  base::FileDescriptor fd;
  MemberEntry entry;
  std::filesystem::path path;
};

Result<OpenMember> hash_member(const MemberSource& source, const BundleLimits& limits) {
  OPCACHE_TRY(check_member_name(source.name));
  OPCACHE_TRY_ASSIGN(base::FileDescriptor fd, base::open_for_reading(source.path));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return base::errno_error("cannot stat", source.path, errno);
  }
  if (!S_ISREG(info.st_mode)) {
    return Error::usage(source.path.string() + " is not a regular file");
  }
  base::Sha256 hash;
  std::uint64_t size = 0;
  char buffer[1 << 16];
  for (;;) {
    OPCACHE_TRY_ASSIGN(std::size_t n, base::read_some(fd.get(), buffer, sizeof buffer, source.path));
    if (n == 0) {
      break;
    }
    hash.update(buffer, n);
    size += n;
    if (size > limits.max_member_bytes) {
      return Error::usage(source.path.string() + " is larger than the member limit of " +
                          std::to_string(limits.max_member_bytes) + " bytes");
    }
  }
  std::string role = source.role.empty() ? role_for_member_name(source.name) : source.role;
  return OpenMember{std::move(fd), MemberEntry{source.name, size, hash.finish_hex(), role}, source.path};
}

// Compresses zstd output chunks into `out` until `input` is consumed (or the
// frame is finished, for ZSTD_e_end).
Status compress_chunk(ZSTD_CCtx* cctx, ZSTD_inBuffer& input, ZSTD_EndDirective mode, base::ByteSink& out) {
  static thread_local std::unique_ptr<char[]> buffer(new char[ZSTD_CStreamOutSize()]);
  const std::size_t capacity = ZSTD_CStreamOutSize();
  for (;;) {
    ZSTD_outBuffer output{buffer.get(), capacity, 0};
    std::size_t remaining = ZSTD_compressStream2(cctx, &output, &input, mode);
    if (ZSTD_isError(remaining)) {
      return Error::internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(remaining));
    }
    OPCACHE_TRY(out.write(buffer.get(), output.pos));
    bool done = mode == ZSTD_e_end ? remaining == 0 : input.pos == input.size;
    if (done) {
      return {};
    }
  }
}

Status compress_member(ZSTD_CCtx* cctx, OpenMember& member, base::ByteSink& out) {
  if (::lseek(member.fd.get(), 0, SEEK_SET) != 0) {
    return base::errno_error("cannot rewind", member.path, errno);
  }
  base::Sha256 hash;
  std::uint64_t size = 0;
  char buffer[1 << 16];
  for (;;) {
    OPCACHE_TRY_ASSIGN(std::size_t n, base::read_some(member.fd.get(), buffer, sizeof buffer, member.path));
    if (n == 0) {
      break;
    }
    hash.update(buffer, n);
    size += n;
    if (size > member.entry.size) {
      break;  // grew since pass 1; reported below
    }
    ZSTD_inBuffer input{buffer, n, 0};
    OPCACHE_TRY(compress_chunk(cctx, input, ZSTD_e_continue, out));
  }
  if (size != member.entry.size || hash.finish_hex() != member.entry.sha256) {
    return Error::io(member.path.string() + " changed while it was being stored; nothing was stored, try again");
  }
  return {};
}

}  // namespace

std::string encode_bundle_header(std::uint32_t manifest_length) {
  std::string header(k_bundle_magic, 8);
  put_u32_le(header, k_bundle_format_version);
  put_u32_le(header, manifest_length);
  return header;
}

Result<WrittenBundle> write_bundle(const BundleInput& input, base::ByteSink& out, const BundleWriteOptions& options) {
  if (input.members.empty()) {
    return Error::usage("a bundle needs at least one member file");
  }
  if (input.members.size() > options.limits.max_members) {
    return Error::usage("a bundle may hold at most " + std::to_string(options.limits.max_members) + " members, not " +
                        std::to_string(input.members.size()));
  }
  std::vector<OpenMember> members;
  Manifest manifest;
  for (const auto& source : input.members) {
    OPCACHE_TRY_ASSIGN(OpenMember member, hash_member(source, options.limits));
    for (const auto& seen : members) {
      if (seen.entry.name == member.entry.name) {
        return Error::usage("two member files share the name \"" + member.entry.name + "\"");
      }
    }
    manifest.members.push_back(member.entry);
    members.push_back(std::move(member));
  }
  if (manifest.total_size() > options.limits.max_total_bytes) {
    return Error::usage("member files add up to more than the bundle limit of " +
                        std::to_string(options.limits.max_total_bytes) + " bytes");
  }
  OPCACHE_TRY_ASSIGN(manifest.key, derive_key(input.descriptor, input.scenario));
  manifest.descriptor = input.descriptor;
  manifest.scenario = input.scenario;
  manifest.producer = Producer{"opcache", k_version_string, host_name()};
  manifest.created = input.created.empty() ? rfc3339_now() : input.created;
  manifest.build_ms = input.build_ms < 0 ? 0 : input.build_ms;

  OPCACHE_TRY_ASSIGN(std::string manifest_bytes, base::canonical_json(manifest_to_json(manifest)));
  if (manifest_bytes.size() > options.limits.max_manifest_bytes) {
    return Error::usage("the manifest would be " + std::to_string(manifest_bytes.size()) +
                        " bytes, above the limit of " + std::to_string(options.limits.max_manifest_bytes) +
                        " (is the descriptor very large?)");
  }

  base::HashingSink hashed(out);
  std::string header = encode_bundle_header(static_cast<std::uint32_t>(manifest_bytes.size()));
  OPCACHE_TRY(hashed.write(header.data(), header.size()));
  OPCACHE_TRY(hashed.write(manifest_bytes.data(), manifest_bytes.size()));

  CCtxPtr cctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
  if (!cctx) {
    return Error::internal("zstd: cannot create a compression context");
  }
  int level = options.compression_level < 1 ? 1 : (options.compression_level > 19 ? 19 : options.compression_level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 0);  // members carry SHA-256 already
  ZSTD_CCtx_setPledgedSrcSize(cctx.get(), manifest.total_size());
  for (auto& member : members) {
    OPCACHE_TRY(compress_member(cctx.get(), member, hashed));
  }
  ZSTD_inBuffer empty{nullptr, 0, 0};
  OPCACHE_TRY(compress_chunk(cctx.get(), empty, ZSTD_e_end, hashed));

  WrittenBundle written;
  written.bytes = hashed.bytes();
  written.digest = hashed.finish_hex();
  written.manifest = std::move(manifest);
  return written;
}

}  // namespace opcache::store
