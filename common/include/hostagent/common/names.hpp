// hostagent/common/names: the one rule for the names hostagent takes from requests and templates
// and turns into libvirt domain names, file names (records, seeds, volumes) and URL path segments:
// VM names and template names alike.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hostagent {

inline constexpr std::size_t kMaxNameLength = 64;
// The rule in words, for the messages that refuse a name.
inline constexpr std::string_view kNameRule = "use 1-64 letters, digits, '.', '_' or '-', not starting with '.'";

// 1-64 of A-Z a-z 0-9 _ . -, not starting with '.': never "." or "..", so never a path of its own,
// and nothing XML, a URL or a shell would read specially.
bool is_name(std::string_view text);
// Why text is not a name ("it is empty", "it starts with '.'", ...); "" when it is one.
std::string name_problem(std::string_view text);

}  // namespace hostagent
