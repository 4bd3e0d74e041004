// common/text_file: a whole file as text, with errno translated. For configuration and template
// files, which are small and read once, and for outputs written whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "hostagent/common/named_file.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent {

// Opened as common/named_file opens a file someone named: never blocking, a regular file only, at
// most max_bytes. ErrorCode::not_found when it does not exist, invalid_argument when it is not a
// regular file or is larger, io_error when it cannot be read.
Result<std::string> read_text_file(const std::filesystem::path& file, std::uintmax_t max_bytes = kMaxTextFileBytes);

// The end of a log that grows (a guest's serial console as virtlogd writes it): its last `lines`
// lines, within its last `max_bytes` bytes, and its size when read. A file of any size is read
// this way; a line cut by max_bytes is left out whole. Opened as read_text_file opens a file.
struct TextTail {
  std::string text;
  std::uintmax_t file_bytes = 0;
  bool whole = false;  // text is the whole file
};
Result<TextTail> read_text_tail(const std::filesystem::path& file, std::size_t lines, std::size_t max_bytes);
// The last `lines` lines of `text`, each with its line break (the last may lack one): the rule
// read_text_tail keeps, for text already in memory.
std::string_view last_lines(std::string_view text, std::size_t lines);

// A token file (api.token_file, placement.token_file, --token-file): one word on one line; the
// whitespace around it (the newline an editor adds) is not the token. "" for no file; an empty
// file, or more than one word, is invalid_argument naming `key`.
Result<std::string> read_token_file(const std::filesystem::path& file, const std::string& key);

// Creates or truncates the file and writes text into it; not atomic (state files use their own
// write-and-rename), for outputs a person or a guest reads afterwards.
Status write_text_file(const std::filesystem::path& file, const std::string& text);

}  // namespace hostagent
