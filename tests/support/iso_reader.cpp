// The test-side ISO reader: iso_data_source_new_from_file + iso_image_import, then the root
// directory walked and each file read through its stream.
#include "iso_reader.hpp"

#include <doctest/doctest.h>
#include <libisofs.h>

#include <memory>
#include <mutex>

namespace hostagent::cloudinit::testing {
namespace {

struct SourceUnref {
  void operator()(IsoDataSource* src) const { iso_data_source_unref(src); }
};
struct ReadOptsFree {
  void operator()(IsoReadOpts* opts) const { iso_read_opts_free(opts); }
};
struct ImageUnref {
  void operator()(IsoImage* image) const { iso_image_unref(image); }
};
struct FeaturesDestroy {
  void operator()(IsoReadImageFeatures* f) const { iso_read_image_features_destroy(f); }
};
struct IterFree {
  void operator()(IsoDirIter* iter) const { iso_dir_iter_free(iter); }
};

void require_ok(const char* what, int rc) {
  INFO(what << ": " << (rc < 0 ? iso_error_to_msg(rc) : "ok"));
  REQUIRE(rc >= 0);
}

std::string read_stream(IsoStream* stream) {
  require_ok("iso_stream_open", iso_stream_open(stream));
  std::string out;
  char buffer[4096];
  int got = 0;
  while ((got = iso_stream_read(stream, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(got));
  const int close_rc = iso_stream_close(stream);
  require_ok("iso_stream_read", got);
  require_ok("iso_stream_close", close_rc);
  return out;
}

void read_root(IsoImage* image, IsoContents& contents) {
  IsoDirIter* raw_iter = nullptr;
  require_ok("iso_dir_get_children", iso_dir_get_children(iso_image_get_root(image), &raw_iter));
  const std::unique_ptr<IsoDirIter, IterFree> iter(raw_iter);
  IsoNode* node = nullptr;
  while (iso_dir_iter_next(iter.get(), &node) == 1) {
    if (ISO_NODE_IS_DIR(node)) ++contents.directories;
    if (!ISO_NODE_IS_FILE(node)) continue;
    const std::string name = iso_node_get_name(node);
    CHECK_MESSAGE(contents.files.count(name) == 0, "duplicate name " << name);
    contents.files[name] = read_stream(iso_file_get_stream(reinterpret_cast<IsoFile*>(node)));
  }
}

}  // namespace

IsoContents read_iso(const std::filesystem::path& iso, Tree tree) {
  static std::once_flag once;
  std::call_once(once, [] { require_ok("iso_init", iso_init_with_flag(1)); });

  IsoDataSource* raw_src = nullptr;
  require_ok("iso_data_source_new_from_file", iso_data_source_new_from_file(iso.c_str(), &raw_src));
  const std::unique_ptr<IsoDataSource, SourceUnref> src(raw_src);
  IsoReadOpts* raw_opts = nullptr;
  require_ok("iso_read_opts_new", iso_read_opts_new(&raw_opts, 0));
  const std::unique_ptr<IsoReadOpts, ReadOptsFree> opts(raw_opts);
  require_ok("no_rockridge", iso_read_opts_set_no_rockridge(opts.get(), tree == Tree::rock_ridge ? 0 : 1));
  require_ok("no_joliet", iso_read_opts_set_no_joliet(opts.get(), tree == Tree::joliet ? 0 : 1));
  IsoImage* raw_image = nullptr;
  require_ok("iso_image_new", iso_image_new("reader", &raw_image));
  const std::unique_ptr<IsoImage, ImageUnref> image(raw_image);
  IsoReadImageFeatures* raw_features = nullptr;
  require_ok("iso_image_import", iso_image_import(image.get(), src.get(), opts.get(), &raw_features));
  const std::unique_ptr<IsoReadImageFeatures, FeaturesDestroy> features(raw_features);

  IsoContents contents;
  const char* volume_id = iso_image_get_volume_id(image.get());
  contents.volume_id = volume_id != nullptr ? volume_id : "";
  contents.rock_ridge = iso_read_image_features_has_rockridge(features.get()) != 0;
  contents.joliet = iso_read_image_features_has_joliet(features.get()) != 0;
  read_root(image.get(), contents);
  return contents;
}

}  // namespace hostagent::cloudinit::testing
