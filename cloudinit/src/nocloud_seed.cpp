// cloudinit/nocloud_seed: write_nocloud_seed: check, render the files (meta-data, user-data, and
// network-config when a NIC has an MTU), build the ISO, replace the file.
#include "hostagent/cloudinit/nocloud_seed.hpp"

#include "hostagent/common/durable_file.hpp"
#include "iso_image.hpp"
#include "seed_checks.hpp"
#include "seed_yaml.hpp"
#include "user_data_parts.hpp"
#include "vendor_data.hpp"

namespace hostagent::cloudinit {
namespace {

// The label cloud-init's NoCloud datasource looks for (it also accepts "CIDATA").
constexpr const char* kVolumeId = "cidata";

}  // namespace

Result<std::string> seed_user_data(const NoCloudSeed& seed) {
  HA_TRY(auto joined, detail::join_user_data(seed.template_user_data, detail::request_user_data(seed), "user_data"));
  if (joined.empty()) return detail::empty_user_data();
  if (joined.size() > kMaxUserDataBytes) {
    return field_error("user_data",
                       "the seed's user data (the template's boot.cloud_init, then the request's user "
                       "data or keys) is " +
                           std::to_string(joined.size()) +
                           " bytes; at most 65536 (64 KiB): give less, or fetch the rest from the guest");
  }
  return joined;
}

Status write_nocloud_seed(const std::filesystem::path& iso, const NoCloudSeed& seed) {
  HA_TRY_STATUS(detail::check_iso_path(iso));
  HA_TRY_STATUS(detail::check_seed(seed));
  HA_TRY(auto user_data, seed_user_data(seed));
  std::vector<detail::IsoFile> files{{"meta-data", detail::render_meta_data(seed)},
                                     {"user-data", std::move(user_data)}};
  if (auto network = detail::render_network_config(seed); !network.empty()) {
    files.push_back({"network-config", std::move(network)});
  }
  if (auto vendor = detail::render_vendor_data(seed.vendor_files); !vendor.empty()) {
    files.push_back({"vendor-data", std::move(vendor)});
  }
  HA_TRY(const auto image, detail::build_iso(kVolumeId, files));
  return durable::replace_file(iso, image);
}

}  // namespace hostagent::cloudinit
