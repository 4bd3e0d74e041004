// hostagent/state/vm_record: what a VM holds and was made from, kept in its libvirt domain's
// <metadata> under hostagent's namespace. The record is written inside the domain XML, so libvirt
// stores it atomically with the definition: a domain that exists always says what it holds, and
// after a crash the daemon rebuilds its whole allocation ledger from libvirt alone.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::state {

// The namespace URI of hostagent's metadata element; render/ writes the same one.
inline constexpr std::string_view kMetadataNamespace = "https://hostagent.dev/xmlns/domain/1";
// The version of the record's layout, the format attribute of its element: a record of a newer
// format is unreadable here (json_fields::format_version's rule), and its domain is reported as
// foreign, never changed.
inline constexpr int kVmRecordFormat = 1;

// What the caller gave for this VM beyond the template.
struct VmInputs {
  std::string boot_image;        // the image the VM's disk is a copy-on-write overlay of; "" none
  std::string disk_pool;         // the libvirt storage pool holding the overlay; "" none
  std::string disk_volume;       // the overlay volume's name in disk_pool; "" none
  std::vector<MacAddress> macs;  // VF MACs as requested; empty: derived
  std::string seed_iso;          // the cloud-init NoCloud seed (SSH keys, user data) as a CD-ROM; "" none
  bool user_data = false;        // cloud-init user data was given (kept in the seed, not here)
  bool operator==(const VmInputs&) const = default;
};

// A NIC VF's RDMA side as the host saw it at create, while its host driver still held it (the VM
// then takes the VF whole): what the guest's NCCL needs to find the same port and GID. Only a VF
// the host had probed (an RDMA device registered under it) has one.
struct VfRdma {
  PciAddress vf;
  std::string device;  // the host's name for it, "mlx5_12"; the guest names its own
  int port = 1;
  std::string state;       // the port's: "ACTIVE", "DOWN", ...
  std::string link_layer;  // "Ethernet" (RoCE) or "InfiniBand"
  // RoCE: the index of the GID NCCL picks by default (sriov::roce_v2_gid_index), for
  // NCCL_IB_GID_INDEX; nullopt on InfiniBand or without a RoCE v2 GID.
  std::optional<int> roce_v2_gid_index;
  std::string node_guid;  // "xxxx:xxxx:xxxx:xxxx"
  std::string port_guid;  // InfiniBand only; "" otherwise
  bool operator==(const VfRdma&) const = default;
};

// The nil UUID (RFC 9562): a record's UUID while the record is being made, and never a VM's.
inline constexpr char kNilUuid[] = "00000000-0000-0000-0000-000000000000";

struct VmRecord {
  std::string name;
  // The domain's UUID, chosen by hostagent before the define: rollback and recovery touch a domain
  // only when its UUID is this one, never a same-named domain someone else made. Checked where it
  // came in (the request, or random_uuid) and on reading; the nil UUID only while a record is being
  // made: no record holding it is written.
  Uuid uuid{kNilUuid};
  std::string template_name;
  std::string request_id;  // the caller's id for the create, for idempotent retries; "" none
  std::string created_at;  // RFC 3339, UTC
  numa::Allocation allocation;
  VmInputs inputs;
  // The NCCL topology file rendered for the guest at create, so the API can hand it out without
  // placing the VM again. Kept in the domain's metadata only: the journal does not need it.
  std::string nccl_topology;
  // One per NIC VF that had an RDMA device on the host, in placement order. Domain metadata only.
  std::vector<VfRdma> rdma;
  bool operator==(const VmRecord&) const = default;
};

// Returns domain_xml with the record written into its <metadata><hostagent:vm> element (created if
// the XML has none). Everything already in the element (template, the shape's metadata) is kept.
Result<std::string> embed_record(const std::string& domain_xml, const VmRecord& record);

// Reads the record from either a whole domain XML or the bare metadata element as
// virDomainGetMetadata returns it (libvirt strips its prefix and namespace declaration: a root
// element in no namespace is taken as ours). In a domain, the element is found by namespace URI,
// whatever its prefix.
// ErrorCode::not_found when there is no hostagent element; parse_error naming the field otherwise.
Result<VmRecord> parse_record(const std::string& xml);

}  // namespace hostagent::state
