// vmtemplates/yaml_tree (private): yaml-cpp's nodes turned into located values, and the merge that
// `extends` performs on them.
#include "hostagent/vmtemplates/yaml_tree.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "hostagent/common/text.hpp"

namespace hostagent::vmtemplates::yaml {
namespace {

// yaml-cpp counts from 0 and uses -1 for "nowhere" (an empty document); people count from 1.
Location located(const YAML::Mark& mark, const std::string& source) {
  return Location{source, mark.line < 0 ? 1 : mark.line + 1, mark.column < 0 ? 1 : mark.column + 1};
}

std::string child_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// A template is a few dozen nodes. YAML aliases can make a document refer to itself (`&m {a: *m}`)
// or expand exponentially ("billion laughs"); yaml-cpp follows them, so the walk is bounded here.
constexpr int kMaxDepth = 32;
constexpr std::size_t kMaxNodes = 10000;

class Converter {
 public:
  Converter(const std::string& source, std::vector<Problem>& problems) : source_(source), problems_(problems) {}

  Value convert(const YAML::Node& node, const std::string& path) {
    Value value;
    value.at = located(node.Mark(), source_);
    if (!within_limits(value.at, path)) return value;
    ++depth_;
    convert_into(value, node, path);
    --depth_;
    return value;
  }

 private:
  bool within_limits(const Location& at, const std::string& path) {
    if (exceeded_) return false;
    if (depth_ < kMaxDepth && ++nodes_ <= kMaxNodes) return true;
    exceeded_ = true;
    problems_.push_back({at, (path.empty() ? "" : path + ": ") + "found a document nested deeper than " +
                                 std::to_string(kMaxDepth) + " levels or larger than " + std::to_string(kMaxNodes) +
                                 " nodes (a YAML alias that refers to itself?), expected a template of plain values"});
    return false;
  }

  void convert_into(Value& value, const YAML::Node& node, const std::string& path) {
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        value.kind = Value::Kind::scalar;
        value.scalar = node.Scalar();
        break;
      case YAML::NodeType::Sequence:
        value.kind = Value::Kind::list;
        for (std::size_t i = 0; i < node.size() && !exceeded_; ++i) {
          value.items.push_back(convert(node[i], path + "[" + std::to_string(i) + "]"));
        }
        break;
      case YAML::NodeType::Map: {
        value.kind = Value::Kind::mapping;
        std::unordered_map<std::string, Location> seen;  // each key once, found in one look
        for (auto it = node.begin(); it != node.end() && !exceeded_; ++it) {
          add_entry(value, seen, it->first, it->second, path);
        }
        break;
      }
      default:
        break;  // Null and Undefined: absent
    }
  }

  void add_entry(Value& mapping, std::unordered_map<std::string, Location>& seen, const YAML::Node& key,
                 const YAML::Node& value, const std::string& path) {
    const Location key_at = located(key.Mark(), source_);
    if (!key.IsScalar()) {
      problems_.push_back({key_at, (path.empty() ? "" : path + ": ") + "found " +
                                       (key.IsMap()        ? "a mapping"
                                        : key.IsSequence() ? "a list"
                                                           : "nothing") +
                                       " as a key, expected a key name"});
      return;
    }
    const std::string& name = key.Scalar();
    if (const auto [first, added] = seen.emplace(name, key_at); !added) {
      problems_.push_back({key_at, child_path(path, name) + ": found a second \"" + name + "\" (the first is at " +
                                       std::to_string(first->second.line) + ":" + std::to_string(first->second.column) +
                                       "), expected each key once"});
      return;
    }
    Value converted = convert(value, child_path(path, name));
    if (exceeded_) return;  // past the bound nothing more is kept: its problem says so
    mapping.entries.push_back(Entry{name, key_at, std::move(converted)});
  }

  const std::string& source_;
  std::vector<Problem>& problems_;
  int depth_ = 0;
  std::size_t nodes_ = 0;
  bool exceeded_ = false;
};

}  // namespace

std::string to_string(const Location& at) {
  return at.source + ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
}

std::string problem_line(const Problem& problem) {
  return text::shown(to_string(problem.at) + ": " + problem.text);
}

std::string problem_lines(const std::vector<Problem>& problems) {
  std::string message;
  const std::size_t shown = std::min(problems.size(), kMaxProblemsShown);
  for (std::size_t i = 0; i < shown; ++i) {
    if (!message.empty()) message += '\n';
    message += problem_line(problems[i]);
  }
  if (problems.size() > shown) {
    message += "\n" + std::to_string(problems.size() - shown) + " more problems not shown: fix these first";
  }
  return message;
}

const Entry* Value::find(std::string_view key) const {
  const auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.key == key; });
  return it == entries.end() ? nullptr : &*it;
}

// yaml-cpp reads a whole document into nodes before the walk above can count them, and a flow
// collection's opening brackets cost it memory and time each (a megabyte of "[" held about a
// gigabyte): so flow nesting deeper than the walk would take is refused from the text first. Quoted
// scalars and comments are skipped, as YAML's own grammar does; a bracket inside a plain scalar
// still counts, which can only refuse early a document the walk would refuse later.
std::optional<Location> too_deep(const std::string& text, const std::string& source) {
  int depth = 0;
  int line = 1;
  int column = 0;
  char quote = 0;
  bool escaped = false;  // after a backslash in a double-quoted scalar
  bool comment = false;
  char previous = '\n';
  for (const char c : text) {
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      comment = false;
    } else if (comment) {
    } else if (quote != 0) {
      // A doubled '' in a single-quoted scalar closes and reopens it at once: harmless here.
      if (escaped) {
        escaped = false;
      } else if (quote == '"' && c == '\\') {
        escaped = true;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '#' && (previous == ' ' || previous == '\t' || previous == '\n')) {
      comment = true;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return Location{source, line, column};
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    previous = c;
  }
  return std::nullopt;
}

// YAML is Unicode text of printable characters (YAML 1.2, 5.1 c-printable: tab, line breaks and no
// other C0 control). yaml-cpp takes any bytes, and a template's text reaches every answer that
// lists it, which must be valid UTF-8 JSON: so other bytes are refused here, where the line is known.
std::optional<Problem> unprintable(const std::string& text, const std::string& source) {
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < text.size();) {
    uint32_t code_point = 0;
    const std::size_t length = text::decode_utf8(text, i, code_point);
    const bool control = code_point < 0x20 && code_point != '\t' && code_point != '\n' && code_point != '\r';
    if (length == 0 || control || code_point == 0x7f || code_point == 0xfffe || code_point == 0xffff) {
      const Location at{source, line, static_cast<int>(i - line_start) + 1};
      return Problem{at, length == 0 ? "found a byte that is not UTF-8, expected UTF-8 text"
                                     : "found a control character, expected printable text"};
    }
    if (code_point == '\n') {
      ++line;
      line_start = i + 1;
    }
    i += length;
  }
  return std::nullopt;
}

namespace {

// Where a second document begins, if the text has one: the parser's document events, counted, two
// at most. yaml-cpp's LoadAll keeps asking for documents while the parser says there are more, and
// on some text it says so without end, an empty document each time: a stray ',' before the first
// key did (",name: a\n..."), found by fuzz_template; the handler of a template validation then ran
// until the daemon's memory was gone. So the documents are counted here, and only the first loaded.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ == 2) second_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnAlias(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnScalar(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                const std::string& /*value*/) override {}
  void OnSequenceStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                       YAML::EmitterStyle::value /*style*/) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                  YAML::EmitterStyle::value /*style*/) override {}
  void OnMapEnd() override {}
  int documents() const { return documents_; }
  const YAML::Mark& second() const { return second_; }

 private:
  int documents_ = 0;
  YAML::Mark second_;
};

std::optional<YAML::Mark> second_document(const std::string& text) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  DocumentCounter counter;
  while (counter.documents() < 2 && parser.HandleNextDocument(counter)) {
  }
  if (counter.documents() < 2) return std::nullopt;
  return counter.second();
}

}  // namespace

Result<Value> parse_yaml(const std::string& text, const std::string& source, std::vector<Problem>& problems) {
  if (const auto bad = unprintable(text, source)) {
    return Error{ErrorCode::invalid_argument, to_string(bad->at) + ": " + bad->text};
  }
  if (const auto at = too_deep(text, source)) {
    return Error{ErrorCode::invalid_argument, to_string(*at) + ": found flow collections nested deeper than " +
                                                  std::to_string(kMaxDepth) +
                                                  " levels, expected a template of plain values"};
  }
  std::optional<YAML::Mark> second;
  YAML::Node document;
  try {
    second = second_document(text);
    if (!second) document = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's message may quote a byte of the text, cut out of its UTF-8 sequence (an unknown
    // escape "\" followed by U+0320 is reported by its first byte alone): shown as \xNN.
    return Error{ErrorCode::invalid_argument, to_string(located(e.mark, source)) + ": found invalid YAML (" +
                                                  text::shown(e.msg) + "), expected a mapping of template keys"};
  }
  if (second) {
    return Error{ErrorCode::invalid_argument, to_string(located(*second, source)) +
                                                  ": found a second YAML document, expected one template per file"};
  }
  return Converter(source, problems).convert(document, "");
}

Value merge(const Value& parent, const Value& child) {
  if (parent.kind != Value::Kind::mapping || child.kind != Value::Kind::mapping) return child;
  Value merged = parent;
  merged.at = child.at;
  for (const Entry& entry : child.entries) {
    auto it =
        std::find_if(merged.entries.begin(), merged.entries.end(), [&](const Entry& e) { return e.key == entry.key; });
    if (entry.value.is_null()) {
      if (it != merged.entries.end()) merged.entries.erase(it);
    } else if (it == merged.entries.end()) {
      merged.entries.push_back(entry);
    } else {
      *it = Entry{entry.key, entry.key_at, merge(it->value, entry.value)};
    }
  }
  return merged;
}

Value without_keys(const Value& mapping, const std::vector<std::string_view>& keys) {
  Value kept = mapping;
  std::erase_if(kept.entries, [&](const Entry& e) { return std::find(keys.begin(), keys.end(), e.key) != keys.end(); });
  return kept;
}

}  // namespace hostagent::vmtemplates::yaml
