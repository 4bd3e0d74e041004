// cloudinit/seed_yaml: meta-data and generated user-data through YAML::Emitter.
#include "seed_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace hostagent::cloudinit::detail {
namespace {

// cloud-init chooses a part's handler by how the user data starts: cloud-config must begin with
// exactly this (a YAML comment from the emitter would read "# cloud-config", which it does not recognise).
constexpr const char* kCloudConfigHeader = "#cloud-config\n";

std::string finish(const YAML::Emitter& out) {
  HA_ASSERT(out.good());  // only emitter misuse (unbalanced Begin/End) makes it fail
  return std::string(out.c_str()) + "\n";
}

}  // namespace

// Every value is double-quoted: cloud-init reads YAML 1.1 (PyYAML), where a plain 123, "no" or
// "null" would arrive as a number, a boolean or nothing instead of the host name or key given.
std::string render_meta_data(const NoCloudSeed& seed) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "instance-id" << YAML::Value << YAML::DoubleQuoted << seed.instance_id;
  out << YAML::Key << "local-hostname" << YAML::Value << YAML::DoubleQuoted << seed.hostname;
  out << YAML::EndMap;
  return finish(out);
}

std::string request_user_data(const NoCloudSeed& seed) {
  if (!seed.user_data.empty()) return seed.user_data;
  if (seed.ssh_authorized_keys.empty()) return "";
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (!seed.ssh_authorized_keys.empty()) {
    out << YAML::Key << "ssh_authorized_keys" << YAML::Value << YAML::BeginSeq;
    for (const auto& key : seed.ssh_authorized_keys) out << YAML::DoubleQuoted << key;
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return kCloudConfigHeader + finish(out);
}

// Network config version 2 (cloud-init's "Networking config Version 2", netplan's schema): each VF
// matched by MAC, since the guest's names for them depend on its PCI layout and udev rules. The
// entries are named vf0, vf1, ... in the domain's order; set-name is not used, so the guest keeps
// its own interface names.
std::string render_network_config(const NoCloudSeed& seed) {
  const bool any_mtu = std::any_of(seed.nics.begin(), seed.nics.end(), [](const GuestNic& nic) { return nic.mtu; });
  if (!any_mtu) return "";
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "version" << YAML::Value << 2;
  out << YAML::Key << "ethernets" << YAML::Value << YAML::BeginMap;
  for (std::size_t i = 0; i < seed.nics.size(); ++i) {
    const auto& nic = seed.nics[i];
    out << YAML::Key << "vf" + std::to_string(i) << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "match" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "macaddress" << YAML::Value << YAML::DoubleQuoted << nic.mac << YAML::EndMap;
    if (nic.mtu) out << YAML::Key << "mtu" << YAML::Value << *nic.mtu;
    out << YAML::Key << "dhcp4" << YAML::Value << true;
    out << YAML::Key << "optional" << YAML::Value << true;
    out << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap;
  return finish(out);
}

std::string empty_user_data() {
  return std::string(kCloudConfigHeader) + "{}\n";
}

}  // namespace hostagent::cloudinit::detail
