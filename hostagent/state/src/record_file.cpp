// state/record_file: a record file's bytes, parsed.
#include "record_file.hpp"

#include <boost/json/parse.hpp>

#include "hostagent/common/durable_file.hpp"

namespace hostagent::state::detail {

Result<boost::json::value> read_json_document(const std::filesystem::path& file, std::size_t max_bytes,
                                              const InFile& in_file) {
  HA_TRY(const auto text, durable::read_file(file, max_bytes));
  boost::system::error_code ec;
  auto document = boost::json::parse(text, ec);
  if (ec) return in_file("not JSON: " + ec.message());
  return document;
}

}  // namespace hostagent::state::detail
