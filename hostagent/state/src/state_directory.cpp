// state/state_directory: private directories of durable JSON files.
#include "state_directory.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "hostagent/common/durable_file.hpp"

namespace hostagent::state::detail {
namespace {

// An entry's temporary file (durable::temporary_of): a write that never committed.
bool is_temporary_json(std::string_view name) {
  if (!name.ends_with(durable::kTemporarySuffix)) return false;
  name.remove_suffix(durable::kTemporarySuffix.size());
  return name.ends_with(kJsonSuffix);
}

Error io_error(Error error) {
  error.code = ErrorCode::io_error;
  return error;
}

}  // namespace

Status open_private_directory(const std::filesystem::path& directory, std::string_view what) {
  if (directory.empty()) {
    return Error{ErrorCode::invalid_argument, std::string(what) + " directory is empty: configure a path"};
  }
  std::error_code ec;
  const bool created = std::filesystem::create_directories(directory, ec);
  if (ec) {
    return Error{ErrorCode::io_error, "create " + std::string(what) + " directory " + directory.string() + ": " +
                                          ec.message() + " (point the state directory at a writable place)"};
  }
  // mkdir(2) applies the umask to the mode; chmod sets exactly 0700. Only a directory we made:
  // an existing one keeps the permissions its owner gave it.
  if (created && ::chmod(directory.c_str(), 0700) != 0) {
    return io_error(errno_error(errno, "chmod 0700", directory.string()));
  }
  return ok_status();
}

bool is_file_id(std::string_view id) {
  if (id.empty() || id.size() > 128 || id.front() == '.') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

Status for_each_json_file(const std::filesystem::path& directory, std::string_view what,
                          const std::function<Status(const std::filesystem::path&, const std::string&)>& read) {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(directory, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_temporary_json(name)) {
      HA_TRY_STATUS(durable::discard_file(it->path()));
      continue;
    }
    if (!name.ends_with(kJsonSuffix)) continue;
    HA_TRY_STATUS(read(it->path(), name.substr(0, name.size() - kJsonSuffix.size())));
  }
  if (ec) return io_error(errno_error(ec.value(), "list " + std::string(what) + " directory", directory.string()));
  return ok_status();
}

}  // namespace hostagent::state::detail
