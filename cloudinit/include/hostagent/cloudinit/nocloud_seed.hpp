// cloudinit: the cloud-init NoCloud seed of a VM. cloud-init's NoCloud datasource looks
// for a filesystem labelled "cidata" (or "CIDATA") holding the files "meta-data" (YAML: instance-id,
// local-hostname) and "user-data" (whatever the user gives cloud-init); both must be present, and
// "network-config" (network configuration version 2) may be, replacing cloud-init's fallback, and
// "vendor-data" (the host's, run apart from the user's: the NCCL files) may be too. This
// module writes that filesystem as an ISO 9660 image (Rock Ridge + Joliet, built with libisofs),
// which the domain attaches as a read-only CD-ROM (render's GuestOptions::seed_iso).
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::cloudinit {

// One of the guest's NICs (a VF), found by the MAC the domain gives it.
struct GuestNic {
  MacAddress mac;          // "02:1a:...": a unicast address, lower case
  std::optional<int> mtu;  // the template's nics.vf.mtu; nullopt: the guest's default
};

// A file the host writes into the guest at its first boot (the seed's vendor-data, src/vendor_data.hpp).
struct GuestFile {
  std::string path;     // absolute; A-Z a-z 0-9 . _ - / only
  std::string content;  // any bytes; the file is mode 0644, owned by root
  // "" or a kernel module's name (a-z 0-9 _): the module the file configures, loaded again after
  // the file is written if it is loaded and nothing holds it (a modprobe.d file is read at a load).
  std::string reload_module;
};

struct NoCloudSeed {
  // cloud-init runs its first-boot modules once per instance id (and keeps its state under
  // /var/lib/cloud/instances/<instance-id> in the guest): the VM's UUID.
  // 1-128 characters from A-Z a-z 0-9 _ . -, not starting with '.'.
  std::string instance_id;
  std::string hostname;  // local-hostname: an RFC 1123 label (1-63 of A-Z a-z 0-9 -, no '-' at either end)
  // Each one line of printable ASCII, "<type> <base64> [comment]", e.g. "ssh-ed25519 AAAA... alice@laptop".
  std::vector<std::string> ssh_authorized_keys;
  // cloud-init user data as given ("#cloud-config ...", a script, a MIME multipart, gzip...), written
  // byte for byte; "" for none. Giving both this and ssh_authorized_keys is refused.
  std::string user_data;
  // The template's boot.cloud_init, "" for none. With the request's part (user_data, or the keys),
  // the two are joined into one MIME multipart, the template's first; the request's lists add to the
  // template's and its scalars win (the rule is in src/user_data_parts.hpp and docs/templates.md).
  std::string template_user_data;
  // The guest's VFs. When any has an MTU, the seed carries a network-config naming each by MAC, with
  // its MTU, DHCP on and marked optional (a cluster fabric without DHCP must not hold the boot);
  // otherwise none, and the image's or cloud-init's fallback configuration decides.
  std::vector<GuestNic> nics;
  // The host's own files for the guest (the NCCL topology, /etc/nccl.conf, the nvidia module's
  // options), as vendor-data.
  std::vector<GuestFile> vendor_files;
};

inline constexpr std::size_t kMaxUserDataBytes = std::size_t{64} * 1024;

// Validates the seed (every message names the field), then writes the ISO at `iso` (an absolute
// path) atomically: a temporary file in the same directory, fsync, rename over `iso`, fsync the
// directory. The file is mode 0600 (user data may hold secrets); libvirt's DAC driver hands it to
// the QEMU user when the domain starts. A missing directory is not_found naming the path.
// Thread-safe.
Status write_nocloud_seed(const std::filesystem::path& iso, const NoCloudSeed& seed);

// The user-data file the seed carries, or why it cannot be made (invalid_argument naming user_data:
// a MIME or compressed user data cannot be joined with a template's part). Writes nothing: a create
// asks it before any step runs.
Result<std::string> seed_user_data(const NoCloudSeed& seed);

}  // namespace hostagent::cloudinit
