// common/text_file: reading a file whole.
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

}  // namespace hostagent
