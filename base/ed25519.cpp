#include "base/ed25519.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::base {

namespace {

using KeyPointer = std::shared_ptr<EVP_PKEY>;

// A PEM Ed25519 key is about 120 bytes; anything much larger is not one.
constexpr std::size_t k_max_key_file_bytes = 16 * 1024;

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPointer = std::unique_ptr<BIO, BioDeleter>;

struct ContextDeleter {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};
using ContextPointer = std::unique_ptr<EVP_MD_CTX, ContextDeleter>;

KeyPointer wrap(EVP_PKEY* key) { return KeyPointer(key, EVP_PKEY_free); }

// OpenSSL's last error, for messages (and clears the queue).
std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) {
    return "unknown OpenSSL error";
  }
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The file's bytes, refusing symlinks and files group or others may access.
Result<std::string> read_private_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) {
      return Error::not_found("signing key " + path.string() + " does not exist");
    }
    if (error == ELOOP) {
      return Error::usage("signing key " + path.string() + " is a symlink; give the key file itself");
    }
    return Error::io("cannot open signing key " + path.string() + ": " + std::strerror(error));
  }
  FileDescriptor file(fd);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return Error::usage("signing key " + path.string() + " is not a regular file");
  }
  if ((info.st_mode & 077) != 0) {
    return Error::usage("signing key " + path.string() + " is accessible by group or others (mode " +
                        octal_mode(info.st_mode) + "); a private key must be private: chmod 600 " + path.string());
  }
  std::string bytes(k_max_key_file_bytes + 1, '\0');
  OPCACHE_TRY_ASSIGN(std::size_t size, read_up_to(fd, bytes.data(), bytes.size(), path));
  if (size > k_max_key_file_bytes) {
    return Error::usage("signing key " + path.string() + " is larger than a PEM key can be");
  }
  bytes.resize(size);
  return bytes;
}

}  // namespace

Ed25519PrivateKey::Ed25519PrivateKey(std::shared_ptr<evp_pkey_st> key) : m_key(std::move(key)) {
  std::size_t size = k_ed25519_public_key_bytes;
  m_public_key.resize(size);
  if (EVP_PKEY_get_raw_public_key(m_key.get(), reinterpret_cast<unsigned char*>(m_public_key.data()), &size) != 1 ||
      size != k_ed25519_public_key_bytes) {
    m_public_key.clear();
  }
}

Result<Ed25519PrivateKey> Ed25519PrivateKey::generate() {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  if (key == nullptr) {
    return Error::internal("cannot generate an Ed25519 key: " + openssl_error());
  }
  return Ed25519PrivateKey(wrap(key));
}

Result<Ed25519PrivateKey> Ed25519PrivateKey::load_pem_file(const std::filesystem::path& path) {
  OPCACHE_TRY_ASSIGN(std::string pem, read_private_file(path));
  BioPointer bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  EVP_PKEY* key = bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr;
  if (key == nullptr) {
    ERR_clear_error();
    return Error::usage("signing key " + path.string() +
                        " is not a PEM private key (make one with `opcache trust keygen NAME --out FILE`)");
  }
  auto owned = wrap(key);
  if (EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
    return Error::usage("signing key " + path.string() + " is a " + EVP_PKEY_get0_type_name(key) +
                        " key; opcache signs with Ed25519 keys only");
  }
  Ed25519PrivateKey loaded(std::move(owned));
  if (loaded.m_public_key.empty()) {
    return Error::usage("signing key " + path.string() + ": cannot derive its public key: " + openssl_error());
  }
  return loaded;
}

Status Ed25519PrivateKey::save_pem_file(const std::filesystem::path& path) const {
  BioPointer bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), m_key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Error::internal("cannot encode the private key: " + openssl_error());
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int error = errno;
    if (error == EEXIST) {
      return Error::usage(path.string() + " already exists; opcache never overwrites a key file (choose another --out)");
    }
    return Error::io("cannot create " + path.string() + ": " + std::strerror(error));
  }
  FileDescriptor file(fd);
  if (::fchmod(fd, 0600) != 0) {
    return Error::io("cannot set mode 0600 on " + path.string() + ": " + std::strerror(errno));
  }
  OPCACHE_TRY(write_all(fd, data, static_cast<std::size_t>(size), path));
  if (::fsync(fd) != 0) {
    return Error::io("cannot sync " + path.string() + ": " + std::strerror(errno));
  }
  return {};
}

Result<std::string> Ed25519PrivateKey::sign(std::string_view message) const {
  ContextPointer context(EVP_MD_CTX_new());
  std::string signature(k_ed25519_signature_bytes, '\0');
  std::size_t size = signature.size();
  if (!context || EVP_DigestSignInit(context.get(), nullptr, nullptr, nullptr, m_key.get()) != 1 ||
      EVP_DigestSign(context.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      size != k_ed25519_signature_bytes) {
    return Error::internal("Ed25519 signing failed: " + openssl_error());
  }
  return signature;
}

bool ed25519_verify(std::string_view public_key, std::string_view message, std::string_view signature) {
  if (public_key.size() != k_ed25519_public_key_bytes || signature.size() != k_ed25519_signature_bytes) {
    return false;
  }
  KeyPointer key = wrap(EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(public_key.data()), public_key.size()));
  ContextPointer context(EVP_MD_CTX_new());
  const bool valid =
      key && context && EVP_DigestVerifyInit(context.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
      EVP_DigestVerify(context.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  ERR_clear_error();
  return valid;
}

}  // namespace opcache::base
