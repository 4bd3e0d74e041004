// cloudinit/nocloud_seed: write_nocloud_seed: check, render the two files, build the ISO, replace
// the file.
#include "hostagent/cloudinit/nocloud_seed.hpp"

#include "hostagent/common/durable_file.hpp"
#include "iso_image.hpp"
#include "seed_checks.hpp"
#include "seed_yaml.hpp"

namespace hostagent::cloudinit {
namespace {

// The label cloud-init's NoCloud datasource looks for (it also accepts "CIDATA").
constexpr const char* kVolumeId = "cidata";

}  // namespace

Status write_nocloud_seed(const std::filesystem::path& iso, const NoCloudSeed& seed) {
  HA_TRY_STATUS(detail::check_iso_path(iso));
  HA_TRY_STATUS(detail::check_seed(seed));
  std::vector<detail::IsoFile> files{{"meta-data", detail::render_meta_data(seed)},
                                     {"user-data", detail::render_user_data(seed)}};
  if (files[1].contents.size() > kMaxUserDataBytes) {
    return Error{ErrorCode::invalid_argument, "ssh_authorized_keys make a user-data file of " +
                                                  std::to_string(files[1].contents.size()) +
                                                  " bytes; at most 65536 (64 KiB): give fewer keys"};
  }
  HA_TRY(const auto image, detail::build_iso(kVolumeId, files));
  return durable::replace_file(iso, image);
}

}  // namespace hostagent::cloudinit
