// The name rule: what is a VM or template name, and why the rest are not; the checked name types
// built from it, and the MAC and GUID rules.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/names.hpp"

namespace hostagent {
namespace {

TEST_CASE("names: 1-64 of letters, digits, '.', '_' and '-', not starting with '.' or '-'") {
  for (const std::string& name :
       std::vector<std::string>{"a", "train-0", "gx3-16x128x1h100", "A_b.c-d", "_x", "x-", "0", std::string(64, 'z')}) {
    CAPTURE(name);
    CHECK(is_name(name));
    CHECK(name_problem(name).empty());
  }
}

TEST_CASE("names: each refusal says why, and \".\" and \"..\" are never names") {
  const std::pair<std::string, std::string> cases[] = {
      {"", "it is empty"},
      {std::string(65, 'z'), "it is longer than 64 characters"},
      {".", "it starts with '.'"},
      {"..", "it starts with '.'"},
      {".hidden", "it starts with '.'"},
      {"-rf", "it starts with '-'"},
      {"--help", "it starts with '-'"},
      {"a b", "it contains a character that is not allowed"},
      {"../etc", "it contains a character that is not allowed"},
      {"vm/1", "it contains a character that is not allowed"},
      {"vm\x01", "it contains a character that is not allowed"},
      {"caf\xc3\xa9", "it contains a character that is not allowed"},
      {"a'b", "it contains a character that is not allowed"},
  };
  for (const auto& refused : cases) {  // not a structured binding: clang's CAPTURE cannot take one
    CAPTURE(refused.first);
    CHECK_FALSE(is_name(refused.first));
    CHECK(name_problem(refused.first) == refused.second);
  }
}

TEST_CASE("checked names: parse refuses on the field it is told, and what it accepts reads as its text") {
  const auto refused = VmName::parse("../etc", "name");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK(refused.error().field == "name");
  CHECK(refused.error().message == "name: \"../etc\" is not a VM name: " + std::string(kNameRule));
  const auto template_refused = TemplateName::parse("", "template");
  REQUIRE_FALSE(template_refused.ok());
  CHECK(template_refused.error().field == "template");
  CHECK(template_refused.error().message.find("is not a template name") != std::string::npos);

  const auto name = VmName::parse("train-0", "name");
  REQUIRE(name.ok());
  CHECK(name->str() == "train-0");
  const std::string& text = *name;  // reads as a string where one is asked for
  CHECK(text == "train-0");
  CHECK(*name == std::string("train-0"));
  CHECK(*name == VmName("train-0"));
  CHECK_FALSE(*name == "train-1");
  CHECK(VmName("a") < VmName("b"));
  CHECK("vm " + *name == "vm train-0");
}

TEST_CASE("MACs: six hex pairs of either case, and refused ones name the field") {
  for (const char* mac : {"52:54:00:00:00:01", "02:00:00:00:00:0A", "ff:FF:ff:FF:ff:FF", "00:00:00:00:00:00"}) {
    CAPTURE(mac);
    CHECK(is_mac(mac));
    CHECK(mac_text(mac, "mac").ok());
  }
  CHECK(mac_text("52:54:00:AB:cd:0E", "mac").value() == "52:54:00:ab:cd:0e");
  for (const char* mac : {"", "52:54:00:00:00", "52:54:00:00:00:01:02", "52-54-00-00-00-01", "52:54:00:00:00:0g",
                          "5254:00:00:00:01:", " 52:54:00:00:00:01"}) {
    CAPTURE(mac);
    CHECK_FALSE(is_mac(mac));
    const auto text = mac_text(mac, "vfs[0].mac");
    REQUIRE_FALSE(text.ok());
    CHECK(text.error().field == "vfs[0].mac");
    const auto parsed = MacAddress::parse(mac, "macs[2]");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().field == "macs[2]");
    CHECK(parsed.error().message.find("is not a MAC address") != std::string::npos);
  }
}

TEST_CASE("a VF's MAC: unicast and not all zeros, kept in lower case whichever case it came in") {
  const auto upper = MacAddress::parse("02:AB:00:00:00:0A", "macs[0]");
  REQUIRE(upper.ok());
  CHECK(upper->str() == "02:ab:00:00:00:0a");
  CHECK(*upper == MacAddress::parse("02:ab:00:00:00:0a", "macs[1]").value());
  // The I/G bit is the low bit of the first octet: 01, 03, ..., ff are group addresses.
  for (const char* mac : {"01:00:00:00:00:01", "33:33:00:00:00:01", "ff:ff:ff:ff:ff:ff", "0F:00:00:00:00:01"}) {
    CAPTURE(mac);
    const auto parsed = MacAddress::parse(mac, "macs[3]");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().field == "macs[3]");
    CHECK(parsed.error().message.find("is a multicast address") != std::string::npos);
  }
  const auto zero = MacAddress::parse("00:00:00:00:00:00", "macs[0]");
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message.find("all-zero") != std::string::npos);
  CHECK(MacAddress::parse("fe:00:00:00:00:01", "macs[0]").ok());  // locally administered, unicast
}

TEST_CASE("UUIDs: 8-4-4-4-12 hex digits of either case, one value kept in lower case") {
  const auto upper = Uuid::parse("6B29FC40-CA47-1067-B31D-00DD010662DA", "uuid");
  REQUIRE(upper.ok());
  CHECK(upper->str() == "6b29fc40-ca47-1067-b31d-00dd010662da");
  CHECK(*upper == Uuid::parse("6b29fc40-ca47-1067-b31d-00dd010662da", "uuid").value());
  CHECK(is_uuid(random_uuid()));
  CHECK(Uuid::parse(random_uuid(), "uuid")->str().size() == 36);
  for (const char* bad : {"", "6b29fc40ca471067b31d00dd010662da", "6b29fc40-ca47-1067-b31d-00dd010662d",
                          "{6b29fc40-ca47-1067-b31d-00dd010662da}", "6b29fc40-ca47-1067-b31d-00dd010662dg"}) {
    CAPTURE(bad);
    const auto parsed = Uuid::parse(bad, "uuid");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().field == "uuid");
    CHECK(parsed.error().message.find("is not a UUID") != std::string::npos);
  }
}

TEST_CASE("GUIDs: four groups of four lower-case hex digits, as sysfs prints node_guid") {
  CHECK(is_guid("0c42:a103:0016:4f3e"));
  CHECK(is_guid("0000:0000:0000:0000"));
  CHECK_FALSE(is_guid("0C42:A103:0016:4F3E"));
  CHECK_FALSE(is_guid("0c42:a103:0016"));
  CHECK_FALSE(is_guid("0c42:a103:0016:4f3e:0000"));
  CHECK_FALSE(is_guid("0c42-a103-0016-4f3e"));
  CHECK_FALSE(is_guid(""));
}

}  // namespace
}  // namespace hostagent
