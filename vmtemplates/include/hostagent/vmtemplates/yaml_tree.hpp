// vmtemplates/yaml_tree: YAML as plain values that remember the file and line:column they came
// from; templates and the daemon's configuration are both read through it. Templates are merged along `extends` before
// they are checked, so every value must keep its own origin: an error in an inherited key points into the parent's
// file, not the child's.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::vmtemplates::yaml {

struct Location {
  std::string source;  // the file (or name) the text came from
  int line = 1;        // 1-based, as editors count
  int column = 1;
};

// "source:line:column"
std::string to_string(const Location& at);

struct Entry;

struct Value {
  enum class Kind { null, scalar, list, mapping };
  Kind kind = Kind::null;
  Location at;
  std::string scalar;          // Kind::scalar
  std::vector<Value> items;    // Kind::list
  std::vector<Entry> entries;  // Kind::mapping, in file order

  // The entry for key, or nullptr.
  const Entry* find(std::string_view key) const;
  bool is_null() const { return kind == Kind::null; }
};

struct Entry {
  std::string key;
  Location key_at;
  Value value;
};

// One thing wrong with a template, already worded: "PATH: found X, expected Y".
struct Problem {
  Location at;
  std::string text;
};

// "source:line:column: text" as one line of shown text (common/text's shown()): a key or value the
// file holds may carry a line break or an escape sequence, and a problem is one line of an answer,
// a log line or a terminal's.
std::string problem_line(const Problem& problem);
// The first kMaxProblemsShown of `problems`, in their order, a problem_line each, then how many
// more there are. A bound on what one file costs to answer: the first problems say what to fix,
// and a flow sequence of a thousand empty items, or forty thousand unknown keys, would otherwise
// make an answer (or an operator's screen) of megabytes.
inline constexpr std::size_t kMaxProblemsShown = 50;
std::string problem_lines(const std::vector<Problem>& problems);

// Parses one YAML document. Broken YAML, or a second document, is an Error on its own: nothing
// after it can be trusted. Duplicate keys and keys that are not scalars are added to problems.
Result<Value> parse_yaml(const std::string& text, const std::string& source, std::vector<Problem>& problems);

// The child laid over the parent: mappings merge key by key, anything else in the child replaces the
// parent's value, and a null in the child removes the parent's key (back to the default).
Value merge(const Value& parent, const Value& child);

// The same mapping without the given keys.
Value without_keys(const Value& mapping, const std::vector<std::string_view>& keys);

}  // namespace hostagent::vmtemplates::yaml
