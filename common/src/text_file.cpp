// common/text_file: reading and writing a file whole.
#include "hostagent/common/text_file.hpp"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "hostagent/common/named_file.hpp"

namespace hostagent {

Result<std::string> read_text_file(const std::filesystem::path& file, std::uintmax_t max_bytes) {
  HA_TRY(auto opened, open_named_file(file, FileLimits{max_bytes, false}, "file"));
  return read_opened(opened, max_bytes, "file");
}

Status write_text_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) return errno_error(errno, "open", file.string());
  out << text;
  out.flush();
  if (!out) return errno_error(errno, "write", file.string());
  return ok_status();
}

Result<std::string> read_token_file(const std::filesystem::path& file, const std::string& key) {
  if (file.empty()) return std::string();
  HA_TRY(auto text, read_text_file(file, kMaxTokenFileBytes));
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto last = text.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return Error{ErrorCode::invalid_argument, key + ": " + file.string() + " is empty: write the token on one line"};
  }
  std::string token = text.substr(first, last - first + 1);
  if (token.find_first_of(" \t\r\n") != std::string::npos) {
    return Error{ErrorCode::invalid_argument,
                 key + ": " + file.string() + " holds more than one word: write the token alone on one line"};
  }
  return token;
}

}  // namespace hostagent
