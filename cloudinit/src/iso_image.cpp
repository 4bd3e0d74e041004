// cloudinit/iso_image: libisofs, from an in-memory tree to the bytes of the image. Every libisofs
// object is owned by a unique_ptr from the moment it exists, so each error path frees it all.
#include "iso_image.hpp"

// libisofs.h declares struct burn_source (libburn's track source, which the image generator
// implements) only for programs that do not include libburn.h themselves.
#define LIBISOFS_WITHOUT_LIBBURN 1
#include <libisofs.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace hostagent::cloudinit::detail {
namespace {

constexpr int kBlockSize = 2048;         // an ISO 9660 logical block; what burn_source::read_xt delivers
constexpr int kProfileDistribution = 2;  // iso_write_opts_new: RR + Joliet, default modes and owners

struct ImageUnref {
  void operator()(IsoImage* image) const { iso_image_unref(image); }
};
struct WriteOptsFree {
  void operator()(IsoWriteOpts* opts) const { iso_write_opts_free(opts); }
};
struct StreamUnref {
  void operator()(IsoStream* stream) const { iso_stream_unref(stream); }
};
// The burn source owns the writer thread: free_data stops it if it still runs and joins it
// (libisofs ecma119.c, bs_free_data), then frees the generator; the struct itself is ours to free.
struct BurnSourceFree {
  void operator()(burn_source* source) const {
    source->free_data(source);
    std::free(source);  // allocated by libisofs with calloc
  }
};
using Image = std::unique_ptr<IsoImage, ImageUnref>;
using WriteOpts = std::unique_ptr<IsoWriteOpts, WriteOptsFree>;
using Stream = std::unique_ptr<IsoStream, StreamUnref>;
using BurnSource = std::unique_ptr<burn_source, BurnSourceFree>;

Error libisofs_error(const std::string& what, int code) {
  return Error{ErrorCode::internal, "libisofs: " + what + ": " + iso_error_to_msg(code)};
}

// libisofs must be initialised once per process. iso_init_with_flag(1) is iso_init() without its
// setlocale(LC_CTYPE, ""): the daemon's locale is not a library's to change, and our names are ASCII.
Status init_libisofs() {
  static std::once_flag once;
  static int result = 0;
  std::call_once(once, [] { result = iso_init_with_flag(1); });
  if (result < 0) return libisofs_error("iso_init", result);
  return ok_status();
}

// A stream over a malloc'd copy of the contents: iso_memory_stream_new takes the buffer and
// free()s it with the stream, but only once it has succeeded.
Result<Stream> memory_stream(const std::string& contents) {
  auto* buffer = static_cast<unsigned char*>(std::malloc(contents.empty() ? 1 : contents.size()));
  if (buffer == nullptr) return Error{ErrorCode::internal, "out of memory for a seed file"};
  std::copy(contents.begin(), contents.end(), buffer);
  IsoStream* stream = nullptr;
  if (const int rc = iso_memory_stream_new(buffer, contents.size(), &stream); rc < 0) {
    std::free(buffer);
    return libisofs_error("iso_memory_stream_new", rc);
  }
  return Stream(stream);  // NOLINT(clang-analyzer-unix.Malloc): the stream owns the buffer now
}

Status add_file(IsoImage* image, const IsoFile& file) {
  HA_TRY(auto stream, memory_stream(file.contents));
  // On success the new node holds the stream's reference (libisofs tree.c); on failure it is still ours.
  const int rc = iso_image_add_new_file(image, iso_image_get_root(image), file.name.c_str(), stream.get(), nullptr);
  if (rc < 0) return libisofs_error("add " + file.name, rc);
  static_cast<void>(stream.release());
  return ok_status();
}

Result<WriteOpts> write_options() {
  IsoWriteOpts* raw = nullptr;
  if (const int rc = iso_write_opts_new(&raw, kProfileDistribution); rc < 0) {
    return libisofs_error("iso_write_opts_new", rc);
  }
  WriteOpts opts(raw);
  const auto check = [](const char* what, int rc) -> Status {
    if (rc < 0) return libisofs_error(what, rc);
    return ok_status();
  };
  HA_TRY_STATUS(check("rockridge", iso_write_opts_set_rockridge(opts.get(), 1)));
  HA_TRY_STATUS(check("joliet", iso_write_opts_set_joliet(opts.get(), 1)));
  // The volume id as given ("cidata", as cloud-localds and genisoimage -V write it), not upper-cased
  // into ISO 9660 d-characters; cloud-init accepts either case, blkid reports what is written.
  HA_TRY_STATUS(check("relaxed volume attributes", iso_write_opts_set_relaxed_vol_atts(opts.get(), 1)));
  return opts;
}

Result<Image> new_image(const std::string& volume_id, const std::vector<IsoFile>& files) {
  IsoImage* raw = nullptr;
  if (const int rc = iso_image_new(volume_id.c_str(), &raw); rc < 0) return libisofs_error("iso_image_new", rc);
  Image image(raw);
  iso_image_set_volume_id(image.get(), volume_id.c_str());
  for (const auto& file : files) HA_TRY_STATUS(add_file(image.get(), file));
  return image;
}

// The generator thread fills a ring buffer; read_xt hands it out a block at a time and returns 0 at
// the end, -1 when generation failed (without a code: libisofs prints only FATAL causes, on stderr).
Result<std::string> drain(burn_source* source) {
  std::string bytes;
  unsigned char block[kBlockSize];
  for (;;) {
    const int got = source->read_xt(source, block, kBlockSize);
    if (got == 0) return bytes;
    if (got != kBlockSize) {
      return Error{ErrorCode::internal, "libisofs: generating the seed image failed after " +
                                            std::to_string(bytes.size()) +
                                            " bytes (out of memory, or see hostagentd's standard error)"};
    }
    bytes.append(reinterpret_cast<const char*>(block), kBlockSize);
  }
}

// libisofs keeps unsynchronised process-wide state (the serial number of memory streams, a plain
// static counter in stream.c); seeds are small and rare, so they are built one at a time.
std::mutex& libisofs_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

Result<std::string> build_iso(const std::string& volume_id, const std::vector<IsoFile>& files) {
  HA_TRY_STATUS(init_libisofs());
  const std::lock_guard lock(libisofs_mutex());
  HA_TRY(auto image, new_image(volume_id, files));
  HA_TRY(auto opts, write_options());
  burn_source* raw = nullptr;
  if (const int rc = iso_image_create_burn_source(image.get(), opts.get(), &raw); rc < 0) {
    return libisofs_error("iso_image_create_burn_source", rc);
  }
  const BurnSource source(raw);
  return drain(source.get());
}

}  // namespace hostagent::cloudinit::detail
