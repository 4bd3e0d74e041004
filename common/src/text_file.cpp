// common/text_file: reading and writing a file whole.
#include "hostagent/common/text_file.hpp"

#include <cerrno>
#include <fstream>
#include <sstream>

namespace hostagent {

Result<std::string> read_text_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return errno_error(errno, "read", file.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return errno_error(errno, "read", file.string());
  return text.str();
}

Status write_text_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) return errno_error(errno, "open", file.string());
  out << text;
  out.flush();
  if (!out) return errno_error(errno, "write", file.string());
  return ok_status();
}

}  // namespace hostagent
