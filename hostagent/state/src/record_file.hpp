// state/record_file (private): the reading every JSON record file shares: the bytes hostagent wrote
// through common/durable_file, bounded, parsed. What a record means is its own module's; an error
// here is worded by the caller, which names the file and what to do about it.
#pragma once

#include <boost/json/value.hpp>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent::state::detail {

// Builds the caller's parse_error for its file from why it could not be read.
using InFile = std::function<Error(const std::string& why)>;

// The JSON document in `file` (at most max_bytes): an I/O error as read_file reports it, text that
// is not JSON as in_file("not JSON: ...").
Result<boost::json::value> read_json_document(const std::filesystem::path& file, std::size_t max_bytes,
                                              const InFile& in_file);

}  // namespace hostagent::state::detail
