// Templates that would crash or hang a naive loader, and values that would load here but be refused
// later by the renderer: both are refused at load time, with a location.
#include <doctest/doctest.h>

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

}  // namespace
}  // namespace hostagent::vmtemplates
