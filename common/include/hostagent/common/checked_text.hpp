// hostagent/common/checked_text: text that has passed its rule, as a type of its own. Made where text
// comes in (a request, the command line, a file, a record read back), so whatever takes one needs no
// check of its own and cannot be handed text that skipped it. Rule says what holds and how a
// refusal reads: `static bool holds(std::string_view)` and
// `static Error refusal(std::string_view text, const std::string& field)`; and, for a rule whose
// values have more than one spelling (a MAC or a UUID in either case),
// `static std::string normal(std::string_view)`, the one spelling kept, so two texts of one value
// compare equal everywhere after.
#pragma once

#include <compare>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "hostagent/common/result.hpp"

namespace hostagent {

template <class Rule>
class CheckedText {
 public:
  // text when it holds to the rule, else the rule's refusal (invalid_argument on field).
  static Result<CheckedText> parse(std::string_view text, const std::string& field) {
    if (!Rule::holds(text)) return Rule::refusal(text, field);
    if constexpr (requires { Rule::normal(text); }) {
      return CheckedText(Rule::normal(text));
    } else {
      return CheckedText(std::string(text));
    }
  }
  // A literal in the program's own text ("vm1"): one that breaks the rule, or is not in its normal
  // spelling, is a bug in the program, not input, so it aborts.
  template <std::size_t N>
  CheckedText(const char (&literal)[N]) : value_(literal) {  // NOLINT(google-explicit-constructor)
    HA_ASSERT(Rule::holds(value_));
    if constexpr (requires { Rule::normal(value_); }) HA_ASSERT(Rule::normal(value_) == value_);
  }

  const std::string& str() const noexcept { return value_; }
  // Reads as the text it is wherever a string is read.
  operator const std::string&() const noexcept { return value_; }  // NOLINT(google-explicit-constructor)
  friend bool operator==(const CheckedText&, const CheckedText&) = default;
  // Spelled out: clang-tidy reads the literal 0 a defaulted <=> compares against as a null pointer.
  friend std::strong_ordering operator<=>(const CheckedText& a, const CheckedText& b) { return a.value_ <=> b.value_; }
  // Against text as it came (a record's field, an operation's VM): equal when the texts are.
  friend bool operator==(const CheckedText& a, const std::string& b) { return a.value_ == b; }
  template <std::size_t N>
  friend bool operator==(const CheckedText& a, const char (&b)[N]) {
    return a.value_ == b;
  }
  // Into messages and paths, as its text.
  friend std::string operator+(const std::string& a, const CheckedText& b) { return a + b.value_; }
  friend std::string operator+(const CheckedText& a, const std::string& b) { return a.value_ + b; }

 private:
  explicit CheckedText(std::string value) : value_(std::move(value)) {}
  std::string value_;
};

}  // namespace hostagent
