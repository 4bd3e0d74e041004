// common/sha256: SHA-256 through OpenSSL.
#include "hostagent/common/sha256.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>

#include "hostagent/common/result.hpp"

namespace hostagent {

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  // EVP_Digest fails only when OpenSSL cannot allocate or has no SHA-256: neither is a state a
  // daemon can go on from (its records would be unverifiable).
  HA_ASSERT(EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr) == 1);
  HA_ASSERT(length == 32);
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string hex;
  hex.reserve(std::size_t{2} * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kDigits[digest[i] >> 4U];
    hex += kDigits[digest[i] & 0xFU];
  }
  return hex;
}

bool is_sha256_hex(std::string_view text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace hostagent
