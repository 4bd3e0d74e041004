// vmtemplates/yaml_checker: reads typed values out of located YAML and words what is wrong. Every
// reader reports into one list and keeps going, so a template's or a configuration's author sees
// all of its problems at once; each message says where, what was found and what is expected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/vmtemplates/yaml_tree.hpp"

namespace hostagent::vmtemplates::yaml {

// The candidate closest to word when it is plausibly a typo of it ("vcpu" -> "vcpus"), else nullopt.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string_view>& candidates);

// "a, b or c"
std::string join_choices(const std::vector<std::string_view>& choices);

// What a value is, for "found ...": "\"eight\"" for a scalar, "a mapping", "a list".
std::string describe(const Value& value);

class Checker {
 public:
  explicit Checker(std::vector<Problem>& problems) : problems_(problems) {}

  void report(const Location& at, const std::string& path, const std::string& found, const std::string& expected);
  void report_missing(const Value& mapping, const std::string& path, const std::string& expected);

  // True when value is a mapping; unknown keys are reported with the allowed ones.
  bool mapping(const Value& value, const std::string& path, const std::vector<std::string_view>& allowed);

  // Null values are absent: each reader returns nullopt for them without a report.
  std::optional<int> whole(const Value& value, const std::string& path, int low, int high);
  std::optional<bool> boolean(const Value& value, const std::string& path);
  std::optional<std::string> text(const Value& value, const std::string& path);
  std::optional<std::string> choice(const Value& value, const std::string& path,
                                    const std::vector<std::string_view>& allowed);
  std::optional<uint64_t> byte_size(const Value& value, const std::string& path);
  // A hex PCI id written 0x10de: decimal would silently mean another device (2330 is 0x091a).
  std::optional<uint16_t> pci_id(const Value& value, const std::string& path);
  // A name by common/names' rule (a template's, what it extends, a storage pool's): it becomes file
  // names, domain names and URL segments.
  std::optional<std::string> name(const Value& value, const std::string& path);
  // An XML element name (a metadata key) or a kernel driver's: letters, digits, '.', '_', '-', at
  // most 64, starting with a letter or '_'.
  std::optional<std::string> identifier(const Value& value, const std::string& path);

 private:
  std::vector<Problem>& problems_;
};

}  // namespace hostagent::vmtemplates::yaml
