#include "trace/exec_image.hpp"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "base/file_io.hpp"

namespace opcache::trace {

namespace {

// The kernel reads this much of a file to recognise its format (BINPRM_BUF_SIZE).
constexpr std::size_t k_format_probe_bytes = 256;
// The most program headers read (the kernel refuses tables over 64 KiB).
constexpr unsigned k_max_program_headers = 1024;
constexpr std::uint64_t k_max_interpreter_bytes = 4096;

bool pread_exactly(int fd, void* out, std::size_t size, std::uint64_t offset) {
  return ::pread(fd, out, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size);
}

bool is_shebang_blank(char c) {
  return c == ' ' || c == '\t';
}

// The interpreter named by the "#!" line at the start of `head`, as the
// kernel's binfmt_script reads it.
std::optional<std::string> script_interpreter(std::string_view head) {
  head.remove_prefix(2);
  head = head.substr(0, head.find('\n'));
  std::size_t start = 0;
  while (start < head.size() && is_shebang_blank(head[start])) {
    ++start;
  }
  std::size_t end = start;
  while (end < head.size() && !is_shebang_blank(head[end]) && head[end] != '\0') {
    ++end;
  }
  if (end == start) {
    return std::nullopt;
  }
  return std::string(head.substr(start, end - start));
}

std::optional<std::string> interpreter_segment(int fd, const Elf64_Phdr& header) {
  if (header.p_filesz == 0 || header.p_filesz > k_max_interpreter_bytes) {
    return std::nullopt;
  }
  std::string name(header.p_filesz, '\0');
  if (!pread_exactly(fd, name.data(), name.size(), header.p_offset)) {
    return std::nullopt;
  }
  name.resize(std::strlen(name.c_str()));
  return name.empty() ? std::nullopt : std::optional<std::string>(name);
}

// The PT_INTERP of the 64-bit ELF file `fd` whose header is `elf`.
std::optional<std::string> elf_interpreter(int fd, const Elf64_Ehdr& elf) {
  if (elf.e_phentsize != sizeof(Elf64_Phdr) || elf.e_phnum > k_max_program_headers) {
    return std::nullopt;
  }
  for (unsigned i = 0; i < elf.e_phnum; ++i) {
    Elf64_Phdr header{};
    if (!pread_exactly(fd, &header, sizeof header, elf.e_phoff + std::uint64_t{i} * sizeof header)) {
      return std::nullopt;
    }
    if (header.p_type == PT_INTERP) {
      return interpreter_segment(fd, header);
    }
  }
  return std::nullopt;
}

bool is_elf64(const char* head, std::size_t size) {
  return size >= sizeof(Elf64_Ehdr) && std::memcmp(head, ELFMAG, SELFMAG) == 0 && head[EI_CLASS] == ELFCLASS64;
}

}  // namespace

std::optional<std::string> program_interpreter(const std::string& program) {
  base::FileDescriptor file(::open(program.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.valid()) {
    return std::nullopt;
  }
  char head[k_format_probe_bytes];
  const ssize_t size = ::pread(file.get(), head, sizeof head, 0);
  if (size < 2) {
    return std::nullopt;
  }
  if (head[0] == '#' && head[1] == '!') {
    return script_interpreter(std::string_view(head, static_cast<std::size_t>(size)));
  }
  if (is_elf64(head, static_cast<std::size_t>(size))) {
    Elf64_Ehdr elf{};
    std::memcpy(&elf, head, sizeof elf);
    return elf_interpreter(file.get(), elf);
  }
  return std::nullopt;
}

}  // namespace opcache::trace
