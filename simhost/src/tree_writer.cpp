// simhost/tree_writer: file, directory and symlink creation under the root (see tree_writer.hpp).
#include "tree_writer.hpp"

#include <cerrno>
#include <fstream>
#include <system_error>

#include "hostagent/common/sha256.hpp"

namespace hostagent::simhost::detail {
namespace fs = std::filesystem;

TreeWriter TreeWriter::digesting() {
  TreeWriter writer{fs::path()};
  writer.digesting_ = true;
  return writer;
}

// Each call as its kind, its path and its contents, each ended by a 0 byte so that no two calls'
// bytes run together into a third's.
void TreeWriter::keep(char kind, const std::string& kernel_path, const uint8_t* data, std::size_t size) {
  calls_ += kind;
  calls_ += kernel_path;
  calls_ += '\0';
  calls_.append(reinterpret_cast<const char*>(data), size);
  calls_ += '\0';
}

std::string TreeWriter::digest() const {
  return digesting_ ? sha256_hex(calls_) : "";
}

fs::path TreeWriter::host(const std::string& kernel_path) const {
  return root_ / fs::path(kernel_path).relative_path();
}

void TreeWriter::fail(int err, const std::string& operation, const fs::path& path) {
  if (failed_) return;
  failed_ = true;
  error_ = errno_error(err, operation, path.string());
}

bool TreeWriter::make_parent(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) fail(ec.value(), "mkdir", path.parent_path());
  return !failed_;
}

void TreeWriter::dir(const std::string& kernel_path) {
  if (digesting_) {
    keep('d', kernel_path, nullptr, 0);
    return;
  }
  if (failed_) return;
  std::error_code ec;
  fs::create_directories(host(kernel_path), ec);
  if (ec) fail(ec.value(), "mkdir", host(kernel_path));
}

void TreeWriter::file(const std::string& kernel_path, const std::string& contents) {
  binary(kernel_path, std::vector<uint8_t>(contents.begin(), contents.end()));
}

void TreeWriter::binary(const std::string& kernel_path, const std::vector<uint8_t>& contents) {
  if (digesting_) {
    keep('f', kernel_path, contents.data(), contents.size());
    return;
  }
  const fs::path path = host(kernel_path);
  if (failed_ || !make_parent(path)) return;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) {
    out.write(reinterpret_cast<const char*>(contents.data()), static_cast<std::streamsize>(contents.size()));
  }
  if (!out) fail(errno != 0 ? errno : EIO, "write", path);
}

void TreeWriter::link(const std::string& kernel_path, const std::string& target_kernel_path) {
  if (digesting_) {
    keep('l', kernel_path, reinterpret_cast<const uint8_t*>(target_kernel_path.data()), target_kernel_path.size());
    return;
  }
  const fs::path path = host(kernel_path);
  if (failed_ || !make_parent(path)) return;
  const fs::path from = fs::path(kernel_path).parent_path();
  const fs::path target = fs::path(target_kernel_path).lexically_relative(from);
  std::error_code ec;
  fs::create_symlink(target, path, ec);
  if (ec) fail(ec.value(), "symlink", path);
}

Status TreeWriter::status() const {
  if (failed_) return error_;
  return ok_status();
}

}  // namespace hostagent::simhost::detail
