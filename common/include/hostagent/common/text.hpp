// common/text: the one decoder of UTF-8 and the one way a value is quoted into a message, so that
// whatever a request, a template or a file on disk holds reaches a log or an answer readable and
// harmless (no control characters, no bidirectional overrides, no unbounded length).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hostagent::text {

// Decodes the UTF-8 sequence at text[i]: returns its length and sets code_point, or returns 0 when
// it is malformed (overlong, a surrogate, past U+10FFFF, truncated). RFC 3629 section 3.
std::size_t decode_utf8(std::string_view text, std::size_t i, uint32_t& code_point);

// value in double quotes for a message: printable ASCII and well-formed UTF-8 beyond it as they
// are; a line feed, tab or carriage return as the two characters \n, \t or \r; other control
// characters (C0, DEL, C1), bidirectional controls, bytes that are not UTF-8, the quote and the
// backslash as \xNN; at most `longest` bytes of value, then "...".
std::string quoted(std::string_view value, std::size_t longest = 128);

// value with A-Z as a-z and every other byte as it is: the one spelling of identifiers that are
// hex in either case (a MAC, a UUID).
std::string ascii_lower(std::string_view value);

// value as quoted() shows it, without the quotes and the cut: for a table cell or a log line's
// field, where what a peer or libvirt named reaches a terminal (escape sequences, bidirectional
// overrides, a newline that forges a line: all shown as \xNN, \n).
std::string shown(std::string_view value);

// value with every byte that is not part of well-formed UTF-8 written as the four characters \xNN,
// and nothing else changed: for a JSON string (an answer, an audit line), which must be UTF-8
// (RFC 8259 8.1) and which JSON's own escaping already makes safe to show. A way to show bytes,
// not to carry them: an original "\x80" reads the same.
std::string valid_utf8(std::string_view value);

// Text that may be written as XML character data: well-formed UTF-8 of XML 1.0's Char (production
// [2]: no C0 control but tab, LF and CR, never U+FFFE or U+FFFF; libxml2, and so libvirt, refuses
// the rest). one_line also refuses tab, LF, CR and DEL: names and ids kept in a record, which a
// message or a log line shows whole.
enum class XmlText { multi_line, one_line };
// Why value is not such text ("is not valid UTF-8", "holds a control character"); "" when it is.
std::string xml_text_problem(std::string_view value, XmlText kind);

// A size in bytes in the largest binary unit that holds it whole: "1 GiB", "2 MiB", "64 KiB",
// "3 bytes". How page sizes and memory read in messages and details.
std::string binary_size(uint64_t bytes);

// A size as libvirt writes one in a domain: `value` in `unit` ("" is KiB, libvirt's default for
// memory and pcihole64): b or bytes, and k, M, G, T in either case or as KiB, MiB, GiB, TiB
// (virScaleInteger's binary units). nullopt when either is not libvirt's, or it overflows.
std::optional<uint64_t> libvirt_bytes(std::string_view value, std::string_view unit);

}  // namespace hostagent::text
