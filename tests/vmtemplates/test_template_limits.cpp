// Templates that would crash or hang a naive loader, and values that would load here but be refused
// later by the renderer: both are refused at load time, with a location.
#include <doctest/doctest.h>

#include "hostagent/common/text.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "template_checks.hpp"

namespace hostagent::vmtemplates {
namespace {

TEST_CASE("limits: a YAML alias that refers to itself is refused, not followed forever") {
  const auto message = problems(kMinimalTemplate + "metadata: &m {a: b, c: *m}\n");
  CHECK(message.find("a YAML alias that refers to itself?") != std::string::npos);
  CHECK(message.find("t.yaml:") == 0);
}

TEST_CASE("limits: aliases that expand exponentially are refused") {
  std::string yaml = kMinimalTemplate + "x0: &a0 [q, q, q, q, q, q, q, q, q, q]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    yaml += "x" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev + ", " + prev + ", " + prev + ", " +
            prev + ", " + prev + ", " + prev + ", " + prev + ", " + prev + ", " + prev + ", " + prev + "]\n";
  }
  CHECK(problems(yaml).find("larger than 10000 nodes") != std::string::npos);
}

TEST_CASE("limits: a very long machine type is refused without deep regex recursion") {
  const auto message = problems(kMinimalTemplate + "machine: pc-q35-" + std::string(200000, 'a') + "\n");
  CHECK(message.find("t.yaml:4:10: machine:") != std::string::npos);
}

TEST_CASE("limits: what the renderer would refuse is refused when the template loads") {
  CHECK(problems(kMinimalTemplate + "guest_numa: {cells: 15}\n")
            .find("guest_numa.cells: found 15, expected a whole number 1..14") != std::string::npos);
  CHECK(problems(kMinimalTemplate + "metadata: {xmlns: x}\n").find("metadata.xmlns") != std::string::npos);
  CHECK(problems(kMinimalTemplate + "metadata: {XMLthing: x}\n").find("XML reserves those") != std::string::npos);
  CHECK(
      problems(kMinimalTemplate + "boot: {image: /var/lib/../../etc/shadow}\n")
          .find(
              "boot.image: found \"/var/lib/../../etc/shadow\", expected an absolute path on the host without '..'") !=
      std::string::npos);
}

// Issue 43, defect 7: forty thousand keys cost 2.6 s of CPU and a 9.3 MB answer (each key looked up
// among all before it, and every unknown one reported); a megabyte of "[" held about a gigabyte in
// yaml-cpp. Each is bounded now: keys found in one look, what is past the node bound not kept, the
// problems shown capped, and flow nesting refused from the text before yaml-cpp reads it.
TEST_CASE("limits: forty thousand keys are answered with the first fifty problems and a count, not all") {
  std::string yaml = kMinimalTemplate;
  for (int i = 0; i < 40000; ++i) yaml += "k" + std::to_string(i) + ": 1\n";
  const auto message = problems(yaml);
  std::size_t lines = 1;
  for (const char c : message) lines += c == '\n' ? 1 : 0;
  CHECK(lines == 51);
  CHECK(message.find("more problems not shown: fix these first") != std::string::npos);
  CHECK(message.size() < 20000);
}

TEST_CASE("limits: flow collections nested past the bound are refused from the text, quoted brackets are not") {
  const auto deep = problems(kMinimalTemplate + "metadata: " + std::string(1 << 20, '[') + "\n");
  CHECK(deep ==
        "t.yaml:4:43: found flow collections nested deeper than 32 levels, expected a template of plain values");
  // Within the bound, inside a quoted scalar or a comment: not refused for nesting.
  const auto nesting_refused = [](const std::string& yaml) {
    const auto shape = parse_template(yaml, "t.yaml", nullptr);
    return !shape.ok() && shape.error().message.find("nested deeper") != std::string::npos;
  };
  CHECK_FALSE(nesting_refused(kMinimalTemplate + "metadata: {a: [[[[1]]]]}\n"));
  CHECK_FALSE(nesting_refused(kMinimalTemplate + "description: \"" + std::string(100, '[') + "\\\"[[\"\n"));
  CHECK_FALSE(nesting_refused(kMinimalTemplate + "description: '" + std::string(100, '{') + "'\n"));
  CHECK_FALSE(nesting_refused(kMinimalTemplate + "# " + std::string(100, '[') + "\n"));
}

// Issue 43, defect 9: a template's text reaches every templates answer, which is JSON and so UTF-8.
TEST_CASE("limits: text that is not UTF-8, or holds a control character, is refused at its line and column") {
  CHECK(problems(kMinimalTemplate + "description: caf\xe9\n") ==
        "t.yaml:4:17: found a byte that is not UTF-8, expected UTF-8 text");
  CHECK(problems(kMinimalTemplate + "description: a\x1b[2Jb\n") ==
        "t.yaml:4:15: found a control character, expected printable text");
  const auto accented = parse_template(kMinimalTemplate + "description: \xc3\xa9t\xc3\xa9\n", "t.yaml", nullptr);
  REQUIRE_MESSAGE(accented.ok(), (accented.ok() ? "" : accented.error().message));
  CHECK(accented->description == "\xc3\xa9t\xc3\xa9");
}

// Found by fuzz_template (issue 43): on this text yaml-cpp's parser reports an empty document
// without end, and LoadAll, asking for the next while there is one, never returned (a validate
// request held its thread and grew until the daemon's memory was gone).
TEST_CASE("limits: text on which yaml-cpp finds documents without end is refused as a second document") {
  const auto message = problems(",name: deep\nmetadata: # -\"[[[[[[1]]]]]]\n");
  CHECK_MESSAGE(message.find("found a second YAML document, expected one template per file") != std::string::npos,
                message);
}

// Found by fuzz_template: a key that YAML's escapes give a line break printed a problem of
// several lines. Each problem is one line of shown text.
TEST_CASE("limits: a key that holds a line break or an escape sequence is one line of the problems, shown") {
  const auto message = problems(kMinimalTemplate + "\"evil\\nforged: line\\u001b[2J\": 1\n");
  CHECK_MESSAGE(message.find('\n') == std::string::npos, message);
  CHECK_MESSAGE(message.find("evil\\nforged: line\\x1b[2J: found an unknown key") != std::string::npos, message);
}

// Found by the fuzz campaign (issue 43): yaml-cpp names an unknown escape by its first byte, which
// cut a two-byte character in half and made the refusal itself invalid UTF-8.
TEST_CASE("limits: an unknown escape before a multi-byte character is refused in valid UTF-8, the byte shown") {
  const auto message = problems("\"o\\\xcc\xa0n");
  CHECK_MESSAGE(text::valid_utf8(message) == message, message);
  CHECK_MESSAGE(message.find("found invalid YAML (unknown escape character: \\xcc)") != std::string::npos, message);
}

}  // namespace
}  // namespace hostagent::vmtemplates
