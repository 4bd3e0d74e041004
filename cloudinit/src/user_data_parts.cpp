#include "user_data_parts.hpp"

#include <array>
#include <utility>

namespace hostagent::cloudinit::detail {
namespace {

// cloud-init's starts-with table, longest prefixes first where one is a prefix of another.
constexpr std::array<std::pair<const char*, const char*>, 9> kTypes{{
    {"#include-once", "text/x-include-once-url"},
    {"#include", "text/x-include-url"},
    {"#cloud-config-archive", "text/cloud-config-archive"},
    {"#cloud-config", "text/cloud-config"},
    {"#cloud-boothook", "text/cloud-boothook"},
    {"#part-handler", "text/part-handler"},
    {"#upstart-job", "text/upstart-job"},
    {"## template: jinja", "text/jinja2"},
    {"#!", "text/x-shellscript"},
}};

constexpr const char* kRequestMerge = "list(append)+dict(recurse_array)+str()";

std::string part(const std::string& body, const std::string& type, const std::string& name, bool merge) {
  std::string out = "Content-Type: " + type + "; charset=\"utf-8\"\nMIME-Version: 1.0\n";
  out += "Content-Transfer-Encoding: 8bit\n";
  out += "Content-Disposition: attachment; filename=\"" + name + "\"\n";
  if (merge) out += std::string("Merge-Type: ") + kRequestMerge + "\n";
  out += "\n" + body;
  if (out.back() != '\n') out += '\n';
  return out;
}

// A boundary neither part contains (RFC 2046 5.1.1: it must not appear in the encapsulated text).
std::string boundary_for(const std::string& a, const std::string& b) {
  std::string boundary = "==hostagent-user-data==";
  for (int n = 0; a.find(boundary) != std::string::npos || b.find(boundary) != std::string::npos; ++n) {
    boundary = "==hostagent-user-data-" + std::to_string(n) + "==";
  }
  return boundary;
}

}  // namespace

std::optional<std::string> part_type(const std::string& user_data) {
  for (const auto& [prefix, type] : kTypes) {
    if (user_data.rfind(prefix, 0) == 0) return std::string(type);
  }
  return std::nullopt;
}

Result<std::string> join_user_data(const std::string& template_part, const std::string& request_part,
                                   const std::string& field) {
  if (template_part.empty()) return request_part;
  if (request_part.empty()) return template_part;
  const auto first = part_type(template_part);
  if (!first) {
    return field_error("template",
                       "its boot.cloud_init does not start with a cloud-init header (#cloud-config, #!, #include, "
                       "...), so it cannot be joined with the request's user data: fix the template");
  }
  const auto second = part_type(request_part);
  if (!second) {
    return field_error(field,
                       "to be joined with the template's boot.cloud_init it must start with a cloud-init header "
                       "(#cloud-config, #!, #include, ...): MIME or compressed user data cannot be joined, so give it "
                       "as plain text, or use a template without boot.cloud_init");
  }
  const auto boundary = boundary_for(template_part, request_part);
  std::string out = "Content-Type: multipart/mixed; boundary=\"" + boundary + "\"\nMIME-Version: 1.0\n\n";
  out += "--" + boundary + "\n" + part(template_part, *first, "template", false);
  out += "--" + boundary + "\n" + part(request_part, *second, "request", true);
  out += "--" + boundary + "--\n";
  return out;
}

}  // namespace hostagent::cloudinit::detail
