// render/input_checks: validation of names, text, metadata keys, UUIDs and paths before they reach XML.
#include "input_checks.hpp"

#include <cctype>
#include <cstdint>
#include <cstdio>

#include "hostagent/common/names.hpp"
#include "hostagent/common/text.hpp"

namespace hostagent::render::detail {
namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
}

}  // namespace

Status check_vm_name(const std::string& name) {
  const auto why = name_problem(name);
  if (why.empty()) return ok_status();
  return invalid_input("VM name " + text::quoted(name) + " is invalid: " + why + " (" + std::string(kNameRule) + ")");
}

Status check_xml_text(const std::string& what, const std::string& value) {
  const auto why = text::xml_text_problem(value, text::XmlText::multi_line);
  return why.empty() ? ok_status() : invalid_input(what + " " + text::quoted(value) + " " + why);
}

Status check_metadata_key(const std::string& key) {
  const auto bad = [&](const char* why) {
    return invalid_input("metadata key " + text::quoted(key) + " is not usable as an XML element name: " + why);
  };
  if (key.empty()) return bad("it is empty");
  if (key.size() > 64) return bad("it is longer than 64 characters");
  if (std::isalpha(static_cast<unsigned char>(key.front())) == 0 && key.front() != '_') {
    return bad("it must start with a letter or '_'");
  }
  for (const char c : key) {
    if (!is_name_char(c)) return bad("use only A-Z a-z 0-9 _ . -");
  }
  if (key.size() >= 3 && std::tolower(static_cast<unsigned char>(key[0])) == 'x' &&
      std::tolower(static_cast<unsigned char>(key[1])) == 'm' &&
      std::tolower(static_cast<unsigned char>(key[2])) == 'l') {
    return bad("names starting with \"xml\" are reserved");
  }
  return ok_status();
}

Status check_absolute_path(const std::string& what, const std::string& path) {
  HA_TRY_STATUS(check_xml_text(what, path));
  if (path.empty() || path.front() != '/')
    return invalid_input(what + " " + text::quoted(path) + " is not an absolute path");
  if (path.find('\n') != std::string::npos || path.find('\r') != std::string::npos ||
      path.find('\t') != std::string::npos) {
    return invalid_input(what + " " + text::quoted(path) + " contains a line break or tab");
  }
  const std::string padded = path + "/";
  if (padded.find("/../") != std::string::npos)
    return invalid_input(what + " " + text::quoted(path) + " contains \"..\"");
  return ok_status();
}

Status check_kernel_boot(const vmtemplates::BootSpec& boot) {
  constexpr std::size_t kMaxCmdline = 4096;  // as vmtemplates allows; x86 Linux reads 2047 of it
  if (boot.kernel.empty()) {
    if (!boot.initrd.empty())
      return invalid_input("boot initrd " + text::quoted(boot.initrd) + " is given without a kernel");
    if (!boot.cmdline.empty())
      return invalid_input("kernel command line " + text::quoted(boot.cmdline) + " is given without a kernel");
    return ok_status();
  }
  HA_TRY_STATUS(check_absolute_path("boot kernel", boot.kernel));
  if (!boot.initrd.empty()) HA_TRY_STATUS(check_absolute_path("boot initrd", boot.initrd));
  HA_TRY_STATUS(check_xml_text("kernel command line", boot.cmdline));
  for (const char c : boot.cmdline) {
    if (c == '\n' || c == '\r' || c == '\t') {
      return invalid_input("kernel command line " + text::quoted(boot.cmdline) + " contains a line break or tab");
    }
  }
  if (boot.cmdline.size() > kMaxCmdline) {
    return invalid_input("kernel command line is " + std::to_string(boot.cmdline.size()) + " bytes long; at most 4096");
  }
  return ok_status();
}

}  // namespace hostagent::render::detail
