// common/text_file: a whole file as text, with errno translated. For configuration and template
// files, which are small and read once.
#pragma once

#include <filesystem>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent {

// ErrorCode::not_found when it does not exist, io_error when it cannot be read.
Result<std::string> read_text_file(const std::filesystem::path& file);

}  // namespace hostagent
