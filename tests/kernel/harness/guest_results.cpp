// Real-kernel harness: parsing the guest's results log (see guest_results.hpp).
#include "guest_results.hpp"

#include <charconv>

namespace hostagent::testing::kernel {
namespace {

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// "end RC NAME" -> RC and NAME; nullopt when the line is not that shape.
std::optional<std::pair<int, std::string_view>> parse_end(std::string_view rest) {
  const auto space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto rc = parse_int(rest.substr(0, space));
  if (!rc) return std::nullopt;
  return std::pair{*rc, rest.substr(space + 1)};
}

class Parser {
 public:
  void line(std::string_view text) {
    if (!text.starts_with(kGuestMarker)) {
      if (current_ != nullptr) current_->output.append(text).append("\n");
      return;
    }
    marker(text.substr(kGuestMarker.size()));
  }
  GuestRun take() { return std::move(run_); }

 private:
  void marker(std::string_view rest) {
    if (rest.starts_with("tests ")) {
      run_.listed = parse_int(rest.substr(6));
    } else if (rest.starts_with("begin ")) {
      run_.tests.push_back(GuestTestResult{std::string(rest.substr(6)), std::nullopt, {}});
      current_ = &run_.tests.back();
    } else if (rest.starts_with("end ")) {
      const auto end = parse_end(rest.substr(4));
      if (end && current_ != nullptr && current_->name == end->second) current_->exit_code = end->first;
      // Between test cases an end whose begin line is missing: a loaded machine's serial console
      // lost that line once (CI, 2026-12-05), while the test ran and ended. The end names it and
      // carries its status, so it counts; only its output cannot be told apart.
      if (end && current_ == nullptr && find_result(run_, end->second) == nullptr) {
        run_.tests.push_back(GuestTestResult{std::string(end->second), end->first,
                                             "(its begin line was lost from the log: output not attributed)\n"});
      }
      current_ = nullptr;
    } else if (rest == "done") {
      run_.done = true;
      current_ = nullptr;
    }
  }

  GuestRun run_;
  GuestTestResult* current_ = nullptr;  // the test case whose output this is: run_.tests.back(), or none
};

}  // namespace

GuestRun parse_guest_run(std::string_view log) {
  Parser parser;
  std::string line;
  for (const char c : log) {
    if (c == '\r') continue;
    if (c == '\n') {
      parser.line(line);
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) parser.line(line);
  return parser.take();
}

const GuestTestResult* find_result(const GuestRun& run, std::string_view name) {
  for (const auto& test : run.tests) {
    if (test.name == name) return &test;
  }
  return nullptr;
}

std::string tail_lines(std::string_view text, int lines) {
  std::size_t at = text.size();
  if (at > 0 && text[at - 1] == '\n') --at;
  for (int seen = 0; at > 0; --at) {
    if (text[at - 1] == '\n' && ++seen == lines) break;
  }
  return std::string(text.substr(at));
}

}  // namespace hostagent::testing::kernel
