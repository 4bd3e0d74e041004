// common/text: what a value looks like in a message, and which bytes are UTF-8.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "hostagent/common/text.hpp"

namespace hostagent {
namespace {

TEST_CASE("quoted: printable ASCII and well-formed UTF-8 as they are, in double quotes") {
  CHECK(text::quoted("gx3-16x128x1h100") == "\"gx3-16x128x1h100\"");
  CHECK(text::quoted("") == "\"\"");
  CHECK(text::quoted("n\xc3\xa9v \xe2\x82\xac") == "\"n\xc3\xa9v \xe2\x82\xac\"");  // "név €"
  CHECK(text::quoted("\xf0\x9f\x98\x80") == "\"\xf0\x9f\x98\x80\"");                // U+1F600, four bytes
}

TEST_CASE("quoted: line breaks and tabs by name, other controls and the quote itself as \\xNN") {
  const std::pair<std::string, std::string> cases[] = {
      {"a\nb", "\"a\\nb\""},
      {"a\tb\r", "\"a\\tb\\r\""},
      {std::string("a\0b", 3), "\"a\\x00b\""},
      {"\x1b[2J", "\"\\x1b[2J\""},             // ESC: a terminal escape sequence stays inert
      {"\x7f", "\"\\x7f\""},                   // DEL
      {"\xc2\x85", "\"\\xc2\\x85\""},          // U+0085 NEL, a C1 control
      {"say \"hi\"", "\"say \\x22hi\\x22\""},  // the quote cannot end the quoted value early
      {"C:\\x", "\"C:\\x5cx\""},               // nor can a backslash fake an escape
      {"ab\xe2\x80\xae"
       "cd",
       "\"ab\\xe2\\x80\\xaecd\""},                // U+202E RIGHT-TO-LEFT OVERRIDE
      {"\xe2\x81\xa6x", "\"\\xe2\\x81\\xa6x\""},  // U+2066 LEFT-TO-RIGHT ISOLATE
  };
  for (const auto& c : cases) {
    CAPTURE(c.second);
    CHECK(text::quoted(c.first) == c.second);
  }
}

TEST_CASE("quoted: bytes that are not UTF-8 are shown one by one and the rest still decodes") {
  CHECK(text::quoted("\xff"
                     "a") == "\"\\xffa\"");
  CHECK(text::quoted("\xc3"
                     "a") == "\"\\xc3a\"");                      // a lead byte without its continuation
  CHECK(text::quoted("\xc0\xaf") == "\"\\xc0\\xaf\"");           // overlong '/'
  CHECK(text::quoted("\xed\xa0\x80") == "\"\\xed\\xa0\\x80\"");  // a UTF-16 surrogate
}

TEST_CASE("quoted: at most `longest` bytes, then ...") {
  const std::string long_value(200, 'k');
  CHECK(text::quoted(long_value) == "\"" + std::string(128, 'k') + "...\"");
  CHECK(text::quoted(long_value, 40) == "\"" + std::string(40, 'k') + "...\"");
  CHECK(text::quoted(std::string(40, 'k'), 40) == "\"" + std::string(40, 'k') + "\"");
}

TEST_CASE("valid_utf8: well-formed text unchanged, each other byte escaped") {
  CHECK(text::valid_utf8("/v1/vms/n\xc3\xa9v \"q\"\n") == "/v1/vms/n\xc3\xa9v \"q\"\n");
  CHECK(text::valid_utf8("") == "");
  CHECK(text::valid_utf8("a\xff"
                         "b") == "a\\xffb");
  CHECK(text::valid_utf8("\xc3") == "\\xc3");                    // truncated at the end
  CHECK(text::valid_utf8("\xc0\xaf") == "\\xc0\\xaf");           // overlong '/'
  CHECK(text::valid_utf8("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(text::valid_utf8("\xe2\x82"
                         "x\xe2\x82\xac") == "\\xe2\\x82x\xe2\x82\xac");  // the next one still decodes
  // What it returns is itself well-formed, so a second pass changes nothing.
  const std::string once = text::valid_utf8("\x80\xfe\xc3\xa9");
  CHECK(text::valid_utf8(once) == once);
  CHECK(text::xml_text_problem(once, text::XmlText::one_line).empty());
}

TEST_CASE("decode_utf8: lengths and code points of RFC 3629, 0 for what it forbids") {
  struct Case {
    std::string bytes;
    std::size_t length;
    uint32_t code_point;
  };
  const Case good[] = {{"A", 1, 0x41},
                       {"\xc3\xa9", 2, 0xe9},
                       {"\xe2\x82\xac", 3, 0x20ac},
                       {"\xef\xbf\xbf", 3, 0xffff},
                       {"\xf4\x8f\xbf\xbf", 4, 0x10ffff}};
  for (const auto& c : good) {
    CAPTURE(c.code_point);
    uint32_t code_point = 0;
    CHECK(text::decode_utf8(c.bytes, 0, code_point) == c.length);
    CHECK(code_point == c.code_point);
  }
  for (const std::string bad :
       {"\x80", "\xc1\xbf", "\xe0\x80\x80", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", "\xe2\x82", "\xe2\x28\xa1"}) {
    CAPTURE(text::quoted(bad));
    uint32_t code_point = 0;
    CHECK(text::decode_utf8(bad, 0, code_point) == 0);
  }
}

}  // namespace
TEST_CASE("xml_text_problem: XML 1.0 Char, with line breaks only where text may have many lines") {
  using text::XmlText;
  for (const auto kind : {XmlText::multi_line, XmlText::one_line}) {
    CAPTURE(static_cast<int>(kind));
    CHECK(text::xml_text_problem("gx3-16x128x1h100 \xe2\x9c\x93", kind).empty());
    CHECK(text::xml_text_problem("", kind).empty());
    CHECK(text::xml_text_problem(std::string("a\0b", 3), kind) == "holds a control character");
    CHECK(text::xml_text_problem("a\x1b[31m", kind) == "holds a control character");
    CHECK(text::xml_text_problem("\xff", kind) == "is not valid UTF-8");
    CHECK(text::xml_text_problem("\xef\xbf\xbe", kind) == "is not valid UTF-8");  // U+FFFE: no XML Char
    CHECK(text::xml_text_problem("\xed\xa0\x80", kind) == "is not valid UTF-8");  // a surrogate
  }
  CHECK(text::xml_text_problem("two\nlines\tand\r", XmlText::multi_line).empty());
  CHECK(text::xml_text_problem("a\x7f", XmlText::multi_line).empty());  // DEL is an XML Char
  for (const char* one_line_only : {"two\nlines", "a\tb", "a\rb", "a\x7f"}) {
    CAPTURE(one_line_only);
    CHECK(text::xml_text_problem(one_line_only, XmlText::one_line) == "holds a control character");
  }
}

TEST_CASE("binary_size names a size in the largest binary unit that holds it whole") {
  CHECK(text::binary_size(1ULL << 30) == "1 GiB");
  CHECK(text::binary_size(1792ULL << 30) == "1792 GiB");
  CHECK(text::binary_size(2ULL << 20) == "2 MiB");
  CHECK(text::binary_size(12160ULL << 20) == "12160 MiB");  // not whole in GiB
  CHECK(text::binary_size(64ULL << 10) == "64 KiB");
  CHECK(text::binary_size(1000) == "1000 bytes");
}

TEST_CASE("libvirt_bytes reads a size in libvirt's binary units, KiB when none is given") {
  CHECK(text::libvirt_bytes("4294967296", "") == (4ULL << 40));
  CHECK(text::libvirt_bytes("1024", "KiB") == (1ULL << 20));
  CHECK(text::libvirt_bytes("2", "M") == (2ULL << 20));
  CHECK(text::libvirt_bytes("2", "m") == (2ULL << 20));
  CHECK(text::libvirt_bytes("3", "GiB") == (3ULL << 30));
  CHECK(text::libvirt_bytes("1", "T") == (1ULL << 40));
  CHECK(text::libvirt_bytes("5", "bytes") == 5U);
  CHECK(text::libvirt_bytes("5", "b") == 5U);
  CHECK_FALSE(text::libvirt_bytes("1", "parsecs"));
  CHECK_FALSE(text::libvirt_bytes("1", "KB"));  // libvirt's decimal units: none of its domains' sizes
  CHECK_FALSE(text::libvirt_bytes("", "KiB"));
  CHECK_FALSE(text::libvirt_bytes("1x", "KiB"));
  CHECK_FALSE(text::libvirt_bytes("-1", "KiB"));
  CHECK_FALSE(text::libvirt_bytes("18446744073709551615", "KiB"));  // overflows
}

}  // namespace hostagent
