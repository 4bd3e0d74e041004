// hostagent/common/names: the one rule for the names hostagent takes from requests and templates
// and turns into libvirt domain names, file names (records, seeds, volumes) and URL path segments:
// VM names and template names alike; and the value types that carry a name once it is checked.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "hostagent/common/checked_text.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent {

inline constexpr std::size_t kMaxNameLength = 64;
// The rule in words, for the messages that refuse a name.
inline constexpr std::string_view kNameRule = "use 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'";

// 1-64 of A-Z a-z 0-9 _ . -, not starting with '.' or '-': never "." or "..", so never a path of
// its own, never an option to the tools an operator passes it to, and nothing XML, a URL or a
// shell would read specially.
bool is_name(std::string_view text);
// Why text is not a name ("it is empty", "it starts with '.'", ...); "" when it is one.
std::string name_problem(std::string_view text);
// invalid_argument on field: text (quoted) is not a `noun`, and the rule.
Error name_error(std::string_view text, std::string_view noun, const std::string& field);

// A create's idempotency key: 1-128 printable ASCII characters without spaces (a UUID, say). Kept
// in the VM's record and the create's durable request record, and echoed in logs: never a name.
inline constexpr std::size_t kMaxRequestIdLength = 128;
inline constexpr std::string_view kRequestIdRule =
    "use 1 to 128 printable ASCII characters without spaces (a UUID, say)";
bool is_request_id(std::string_view text);

// A UUID (a VM's, a Placement consumer's or resource provider's): 8-4-4-4-12 hex digits in either
// case, as RFC 9562 reads them, kept in lower case, as libvirt and Placement write them, so one
// UUID is one text in records, URLs and XML whichever case a request gave it in.
inline constexpr std::string_view kUuidRule = "a UUID, 32 hex digits as 8-4-4-4-12 (either case)";
bool is_uuid(std::string_view text);
// A random (version 4) UUID, lower case.
std::string random_uuid();

struct UuidRule {
  static bool holds(std::string_view text) { return is_uuid(text); }
  static std::string normal(std::string_view text);
  static Error refusal(std::string_view text, const std::string& field);
};
using Uuid = CheckedText<UuidRule>;

// The rule as CheckedText's, for one kind of name: a VM's or a template's.
template <class Kind>
struct NameRule {
  static bool holds(std::string_view text) { return is_name(text); }
  static Error refusal(std::string_view text, const std::string& field) { return name_error(text, Kind::noun, field); }
};
struct VmNameKind {
  static constexpr std::string_view noun = "VM name";
};
struct TemplateNameKind {
  static constexpr std::string_view noun = "template name";
};
// Apart, so a template's name is never given where a VM's is asked for.
using VmName = CheckedText<NameRule<VmNameKind>>;
using TemplateName = CheckedText<NameRule<TemplateNameKind>>;

}  // namespace hostagent
