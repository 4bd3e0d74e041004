// verify/xz: liblzma's stream decoder over a buffer (see the header).
#include "hostagent/verify/xz.hpp"

#include <lzma.h>

#include <array>
#include <cstdint>

namespace hostagent::verify {

Result<std::string> decompress_xz(std::string_view data, const std::string& what) {
  lzma_stream stream = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&stream, UINT64_MAX, 0) != LZMA_OK) {
    return Error{ErrorCode::internal, "liblzma could not start a decoder for " + what};
  }
  stream.next_in = reinterpret_cast<const uint8_t*>(data.data());
  stream.avail_in = data.size();
  std::string out;
  std::array<uint8_t, 1 << 16> buffer{};
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    stream.next_out = buffer.data();
    stream.avail_out = buffer.size();
    ret = lzma_code(&stream, LZMA_FINISH);
    out.append(reinterpret_cast<const char*>(buffer.data()), buffer.size() - stream.avail_out);
  }
  lzma_end(&stream);
  if (ret != LZMA_STREAM_END) {
    return Error{ErrorCode::parse_error,
                 what + " is not a whole xz stream (liblzma error " + std::to_string(static_cast<int>(ret)) + ")"};
  }
  return out;
}

}  // namespace hostagent::verify
