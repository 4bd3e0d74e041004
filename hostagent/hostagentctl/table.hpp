// hostagentctl's human output: aligned columns and "field: value" blocks, and the JSON scalars and
// sizes in them worded the same way everywhere.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::ctl {

// Columns as wide as their widest cell, two spaces apart, no trailing blanks.
class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  void add_row(std::vector<std::string> cells);  // missing cells are empty; extra ones are an error
  std::string render() const;
  std::size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// "name:     train-0", the names padded to the widest.
std::string render_fields(const std::vector<std::pair<std::string, std::string>>& fields);

// A JSON scalar as an operator reads it: strings bare, null and "" as "-", booleans yes/no,
// arrays joined with ", ".
std::string display(const boost::json::value& value);
// object[key] as display() words it; "-" when absent.
std::string display(const boost::json::value& object, const char* key);
// Text from elsewhere (a server's message, a template's problems) as a terminal may show it: each
// line as common/text's shown() writes it, the line breaks kept.
std::string terminal_text(std::string_view text);
// "hostagentctl: CODE: MESSAGE" on err, the message as terminal_text() shows it. Returns 1, the
// exit status of a command that failed.
int print_failure(std::ostream& err, const Error& error);

// 1.75 TiB, 512 MiB, 2 GiB: binary units, at most two decimals, as the templates write them.
std::string format_bytes(std::uint64_t bytes);

}  // namespace hostagent::ctl
