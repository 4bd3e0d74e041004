// common/json_text: JSON text from outside the daemon (a request body, a file) parsed into a value,
// refusing what boost::json::parse accepts but a reader cannot trust: an object with the same key
// twice. RFC 8259 4 only says names "SHOULD be unique"; boost::json keeps the last, and a proxy or
// policy engine that reads the first would see another request than the daemon runs.
#pragma once

#include <string>
#include <string_view>

#include <boost/json/value.hpp>

#include "hostagent/common/result.hpp"

namespace hostagent::json_text {

// The path of the first key an object repeats ("macs", "inputs.macs", "[2].name"), or "" for none.
// text need not be valid JSON: a syntax error before any repeat is "" (parse() reports it).
std::string duplicate_key(std::string_view text);

// The value, or invalid_argument: "not valid JSON (...)", or "PATH: this key appears twice in one
// object; ..." with field set to the key's path.
Result<boost::json::value> parse(std::string_view text);

}  // namespace hostagent::json_text
