// cloudinit/seed_checks: validation of instance id, hostname, SSH keys, user data and the NICs.
#include "seed_checks.hpp"

#include "vendor_data.hpp"

#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/text.hpp"

#include <array>
#include <cstdio>
#include <string_view>

namespace hostagent::cloudinit::detail {
namespace {

constexpr std::size_t kMaxInstanceId = 128;
constexpr std::size_t kMaxHostname = 63;  // RFC 1035 section 2.3.4: a label is at most 63 octets
constexpr std::size_t kMaxQuoted = 80;

// The plain key types OpenSSH's sshd accepts in authorized_keys (sshkey.c keytypes[]), without DSA, which
// OpenSSH 9.8 removed and earlier releases disable by default.
constexpr std::array<std::string_view, 7> kKeyTypes{"ssh-ed25519",
                                                    "ssh-rsa",
                                                    "ecdsa-sha2-nistp256",
                                                    "ecdsa-sha2-nistp384",
                                                    "ecdsa-sha2-nistp521",
                                                    "sk-ssh-ed25519@openssh.com",
                                                    "sk-ecdsa-sha2-nistp256@openssh.com"};

Error invalid(std::string message) {
  return Error{ErrorCode::invalid_argument, std::move(message)};
}

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool is_base64(char c) {
  return is_alnum(c) || c == '+' || c == '/' || c == '=';
}

Status check_instance_id(const std::string& id) {
  const auto bad = [&](const char* why) {
    return invalid("instance_id " + text::quoted(id, kMaxQuoted) + " is invalid: " + why +
                   " (use 1-128 characters from A-Z a-z 0-9 _ . -, not starting with '.'; the VM's UUID)");
  };
  if (id.empty()) return bad("it is empty");
  if (id.size() > kMaxInstanceId) return bad("it is longer than 128 characters");
  for (const char c : id) {
    if (!is_alnum(c) && c != '_' && c != '.' && c != '-') return bad("it contains a character that is not allowed");
  }
  // cloud-init keeps its per-instance state in /var/lib/cloud/instances/<instance-id>.
  if (id.front() == '.') return bad("it starts with '.'");
  return ok_status();
}

Status check_hostname(const std::string& name) {
  const auto bad = [&](const char* why) {
    return invalid("hostname " + text::quoted(name, kMaxQuoted) + " is not an RFC 1123 host name label: " + why +
                   " (use 1-63 characters from A-Z a-z 0-9 -, not starting or ending with '-')");
  };
  if (name.empty()) return bad("it is empty");
  if (name.size() > kMaxHostname) return bad("it is longer than 63 characters");
  for (const char c : name) {
    if (!is_alnum(c) && c != '-') return bad("it contains a character that is not allowed");
  }
  if (name.front() == '-' || name.back() == '-') return bad("it starts or ends with '-'");
  return ok_status();
}

bool known_key_type(std::string_view type) {
  for (const auto known : kKeyTypes) {
    if (type == known) return true;
  }
  return false;
}

// "<type> <base64>[ <comment>]": the form cloud-init appends to authorized_keys. Options before the
// type ("restrict,command=...") are refused: they change what a key may do, and belong in user data.
Status check_key(std::size_t index, const std::string& key) {
  const std::string what = "ssh_authorized_keys[" + std::to_string(index) + "] " + text::quoted(key, kMaxQuoted);
  for (const char c : key) {
    if (c == '\n' || c == '\r') return invalid(what + " is more than one line: give one key per entry");
    if (c < 0x20 || c > 0x7e) return invalid(what + " contains a character that is not printable ASCII");
  }
  const std::size_t space = key.find(' ');
  const std::string_view type = std::string_view(key).substr(0, space);
  if (!known_key_type(type)) {
    return invalid(what +
                   " does not start with a known key type (ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256/384/521, "
                   "sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com)");
  }
  const std::size_t blob_start = space == std::string::npos ? key.size() : space + 1;
  std::size_t blob_end = blob_start;
  while (blob_end < key.size() && is_base64(key[blob_end])) ++blob_end;
  if (blob_end == blob_start || (blob_end < key.size() && key[blob_end] != ' ')) {
    return invalid(what + " has no base64 key after its type: expected \"<type> <base64> [comment]\"");
  }
  return ok_status();
}

// The MAC is the domain's (render's), a MacAddress; the MTU the template's (validated there,
// 68-9216): checked again, since this module writes it into a file the guest trusts.
Status check_nic(std::size_t index, const GuestNic& nic) {
  const std::string field = "nics[" + std::to_string(index) + "]";
  constexpr int kMinMtu = 68;    // RFC 791: the IPv4 minimum
  constexpr int kMaxMtu = 9216;  // the largest jumbo frame hostagent's templates take
  if (nic.mtu && (*nic.mtu < kMinMtu || *nic.mtu > kMaxMtu)) {
    return field_error(field + ".mtu", std::to_string(*nic.mtu) + " is not an MTU of 68-9216");
  }
  return ok_status();
}

}  // namespace

Status check_seed(const NoCloudSeed& seed) {
  HA_TRY_STATUS(check_instance_id(seed.instance_id));
  HA_TRY_STATUS(check_hostname(seed.hostname));
  if (!seed.user_data.empty() && !seed.ssh_authorized_keys.empty()) {
    return invalid("give ssh_authorized_keys or user_data, not both: put the keys in your user data");
  }
  for (std::size_t i = 0; i < seed.ssh_authorized_keys.size(); ++i) {
    HA_TRY_STATUS(check_key(i, seed.ssh_authorized_keys[i]));
  }
  for (std::size_t i = 0; i < seed.nics.size(); ++i) {
    HA_TRY_STATUS(check_nic(i, seed.nics[i]));
  }
  HA_TRY_STATUS(check_guest_files(seed.vendor_files));
  if (seed.user_data.size() > kMaxUserDataBytes) {
    return invalid("user_data is " + std::to_string(seed.user_data.size()) +
                   " bytes; at most 65536 (64 KiB): compress it (cloud-init reads gzip) or fetch the rest from "
                   "the guest");
  }
  return ok_status();
}

Status check_iso_path(const std::filesystem::path& iso) {
  if (!iso.is_absolute())
    return invalid("seed ISO path " + text::quoted(iso.string(), kMaxQuoted) + " is not an absolute path");
  if (!iso.has_filename())
    return invalid("seed ISO path " + text::quoted(iso.string(), kMaxQuoted) + " does not name a file");
  return ok_status();
}

}  // namespace hostagent::cloudinit::detail
