// common/sha256: the one digest hostagent records: SHA-256 (FIPS 180-4), through OpenSSL's EVP
// interface. Used where a record must show what was seen (a device's firmware image) or that a log
// was not rewritten (each cleaning record carries its predecessor's digest).
#pragma once

#include <string>
#include <string_view>

namespace hostagent {

// The digest of data as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

// True when text is 64 lower-case hex digits: the form sha256_hex writes.
bool is_sha256_hex(std::string_view text);

}  // namespace hostagent
