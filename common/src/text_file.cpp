// common/text_file: reading and writing a file whole.
#include "hostagent/common/text_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string_view>

#include "hostagent/common/named_file.hpp"

namespace hostagent {

Result<std::string> read_text_file(const std::filesystem::path& file, std::uintmax_t max_bytes) {
  HA_TRY(auto opened, open_named_file(file, FileLimits{max_bytes, false}, "file"));
  return read_opened(opened, max_bytes, "file");
}

namespace {

// Where the last `lines` lines of `bytes` begin: after a line break that is not the final byte.
// When `cut` (the bytes begin part way into the file), the first line is partial and never taken.
std::size_t last_lines_begin(std::string_view bytes, std::size_t lines, bool cut) {
  std::size_t begin = bytes.size();
  std::size_t search = !bytes.empty() && bytes.back() == '\n' ? bytes.size() - 1 : bytes.size();
  for (std::size_t found = 0; found < lines; ++found) {
    const std::size_t at = search == 0 ? std::string_view::npos : bytes.rfind('\n', search - 1);
    if (at == std::string_view::npos) return cut ? begin : 0;  // the first line
    begin = at + 1;
    search = at;
  }
  return begin;
}

}  // namespace

Result<TextTail> read_text_tail(const std::filesystem::path& file, std::size_t lines, std::size_t max_bytes) {
  HA_TRY(auto opened, open_named_file(file, FileLimits{0, false}, "file"));
  const std::uintmax_t from = opened.size > max_bytes ? opened.size - max_bytes : 0;
  std::string bytes(static_cast<std::size_t>(opened.size - from), '\0');
  std::size_t got = 0;
  // pread(2) up to the size fstat gave at open: what a writer appends meanwhile is left for later.
  while (got < bytes.size()) {
    const ssize_t n = ::pread(opened.fd.get(), bytes.data() + got, bytes.size() - got, static_cast<off_t>(from + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "read", file.string());
    if (n == 0) break;  // truncated meanwhile (the log rotated): what was read
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  const std::size_t begin = last_lines_begin(bytes, lines, from > 0);
  return TextTail{bytes.substr(begin), opened.size, from == 0 && begin == 0};
}

std::string_view last_lines(std::string_view text, std::size_t lines) {
  return text.substr(last_lines_begin(text, lines, false));
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
