// What write_nocloud_seed refuses, with a message naming the field, and what it reports when the
// filesystem fails it; in every case no file is left behind.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/cloudinit/nocloud_seed.hpp"
#include "test_support.hpp"

namespace hostagent::cloudinit::testing {
namespace {

using hostagent::testing::contains;
using hostagent::testing::TempDir;
namespace fs = std::filesystem;

const std::string kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGd3cmVkZW50aWFsc2FyZW5vdGhlcmVhdGFsbA alice@laptop";

NoCloudSeed valid_seed() {
  NoCloudSeed seed;
  seed.instance_id = "6f3b8c1e-2a4d-4e5f-9a0b-1c2d3e4f5a6b";
  seed.hostname = "train-0";
  seed.ssh_authorized_keys = {kKey};
  return seed;
}

bool directory_empty(const fs::path& dir) {
  return fs::directory_iterator(dir) == fs::directory_iterator();
}

// The error of a write that must fail, after checking it wrote nothing.
Error refused(const NoCloudSeed& seed, ErrorCode expected = ErrorCode::invalid_argument) {
  TempDir dir;
  const auto status = write_nocloud_seed(dir.path() / "seed.iso", seed);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().code == expected);
  CHECK(directory_empty(dir.path()));
  return status.error();
}

bool mentions(const Error& error, const std::string& text) {
  INFO(error.message);
  return contains(error.message, text);
}

TEST_CASE("the valid seed of these tests is written") {
  TempDir dir;
  CHECK(write_nocloud_seed(dir.path() / "seed.iso", valid_seed()).ok());
  CHECK(fs::is_regular_file(dir.path() / "seed.iso"));
}

TEST_CASE("keys and user data together are refused: the keys belong in the user data") {
  auto seed = valid_seed();
  seed.user_data = "#cloud-config\n";
  CHECK(refused(seed).message == "give ssh_authorized_keys or user_data, not both: put the keys in your user data");
}

TEST_CASE("the instance id is 1-128 characters of A-Z a-z 0-9 _ . -, not starting with '.'") {
  auto seed = valid_seed();
  seed.instance_id = "";
  CHECK(mentions(refused(seed), "instance_id \"\" is invalid: it is empty"));
  seed.instance_id = "../../etc";
  CHECK(mentions(refused(seed), "instance_id \"../../etc\" is invalid: it contains a character that is not allowed"));
  seed.instance_id = ".hidden";
  CHECK(mentions(refused(seed), "instance_id \".hidden\" is invalid: it starts with '.'"));
  seed.instance_id = "iid local";
  CHECK(mentions(refused(seed), "instance_id \"iid local\""));
  seed.instance_id = std::string(129, 'a');
  CHECK(mentions(refused(seed), "is longer than 128 characters"));
  seed.instance_id = std::string(128, 'a');
  TempDir dir;
  CHECK(write_nocloud_seed(dir.path() / "seed.iso", seed).ok());
}

TEST_CASE("the hostname is an RFC 1123 label") {
  auto seed = valid_seed();
  for (const char* bad : {"train_0", "train.example.com", "-train", "train-", "tr\xc3\xa4in", "a b"}) {
    CAPTURE(bad);
    seed.hostname = bad;
    const auto error = refused(seed);
    CHECK(mentions(error, "hostname \""));
    CHECK(mentions(error, "is not an RFC 1123 host name label"));
  }
  seed.hostname = "";
  CHECK(mentions(refused(seed), "hostname \"\" is not an RFC 1123 host name label: it is empty"));
  seed.hostname = std::string(64, 'h');
  CHECK(mentions(refused(seed), "it is longer than 63 characters"));
  seed.hostname = "train_0";
  CHECK(mentions(refused(seed), "hostname \"train_0\" is not an RFC 1123 host name label: it contains a character"));
  seed.hostname = "-train";
  CHECK(mentions(refused(seed), "it starts or ends with '-'"));
  TempDir dir;
  for (const std::string& good : {std::string(63, 'h'), std::string("0"), std::string("GPU-node-7")}) {
    CAPTURE(good);
    seed.hostname = good;
    CHECK(write_nocloud_seed(dir.path() / "seed.iso", seed).ok());
  }
}

TEST_CASE("each SSH key is one line of printable ASCII: a known type, then base64") {
  auto seed = valid_seed();
  const auto with_second = [&](const std::string& key) {
    seed.ssh_authorized_keys = {kKey, key};
    return refused(seed);
  };
  CHECK(mentions(with_second(kKey + "\nssh-ed25519 AAAAB evil"), "ssh_authorized_keys[1] \"ssh-ed25519 AAAA"));
  CHECK(mentions(with_second(kKey + "\nssh-ed25519 AAAAB evil"), "is more than one line: give one key per entry"));
  CHECK(mentions(with_second(kKey + "\r"), "is more than one line"));
  CHECK(mentions(with_second("ssh-ed25519 AAAA\tcomment"), "contains a character that is not printable ASCII"));
  CHECK(mentions(with_second("ssh-ed25519 AAAA J\xc3\xb6rg"), "contains a character that is not printable ASCII"));
  CHECK(mentions(with_second("ssh-dss AAAAB3NzaC1kc3M= old"), "does not start with a known key type"));
  CHECK(mentions(with_second("AAAAC3NzaC1lZDI1NTE5AAAAI"), "does not start with a known key type"));
  CHECK(
      mentions(with_second("restrict,command=\"/bin/true\" ssh-ed25519 AAAA"), "does not start with a known key type"));
  CHECK(mentions(with_second(""), "ssh_authorized_keys[1] \"\" does not start with a known key type"));
  CHECK(mentions(with_second("ssh-ed25519"), "has no base64 key after its type"));
  CHECK(mentions(with_second("ssh-ed25519 "), "has no base64 key after its type"));
  CHECK(mentions(with_second("ssh-rsa not-base64!"), "has no base64 key after its type"));
  // The first key is checked as well, and named by its own index.
  seed.ssh_authorized_keys = {"ssh-ed25519", kKey};
  CHECK(mentions(refused(seed), "ssh_authorized_keys[0]"));
  // A long key is quoted in part only.
  seed.ssh_authorized_keys = {"ssh-foo " + std::string(500, 'A')};
  const auto error = refused(seed);
  CHECK(mentions(error, "...\""));
  CHECK(error.message.size() < 400);
}

TEST_CASE("user data is at most 64 KiB, and so is the user data generated from keys") {
  auto seed = valid_seed();
  seed.ssh_authorized_keys.clear();
  seed.user_data = std::string(kMaxUserDataBytes + 1, 'x');
  CHECK(mentions(refused(seed), "user_data is 65537 bytes; at most 65536 (64 KiB)"));
  seed.user_data.clear();
  seed.ssh_authorized_keys.assign(1000, kKey);  // ~ 100 KiB of cloud-config
  const auto error = refused(seed);
  CHECK(mentions(error,
                 "the seed's user data (the template's boot.cloud_init, then the request's user data or keys) is "));
  CHECK(error.field == "user_data");
  CHECK(mentions(error, "at most 65536"));
}

// A NIC's MAC is a MacAddress (common/hardware_ids), checked where it was made.
TEST_CASE("a NIC's MTU is checked, naming the NIC") {
  auto seed = valid_seed();
  seed.nics = {{"02:00:00:00:00:01", 9000}, {"02:00:00:00:00:02", 67}};
  CHECK(refused(seed).field == "nics[1].mtu");
  seed.nics = {{"02:00:00:00:00:01", 67}};
  CHECK(refused(seed).field == "nics[0].mtu");
  seed.nics = {{"02:00:00:00:00:01", 9217}};
  CHECK(mentions(refused(seed), "9217 is not an MTU of 68-9216"));
  seed.nics = {{"02:00:00:00:00:01", 9216}};
  TempDir dir;
  CHECK(write_nocloud_seed(dir.path() / "seed.iso", seed).ok());
}

TEST_CASE("the seed path is absolute and names a file") {
  CHECK(mentions(write_nocloud_seed("seed.iso", valid_seed()).error(),
                 "seed ISO path \"seed.iso\" is not an absolute path"));
  CHECK(mentions(write_nocloud_seed("/var/lib/hostagent/", valid_seed()).error(), "does not name a file"));
}

TEST_CASE("writing into a missing directory is an io_error naming the path") {
  TempDir dir;
  const auto iso = dir.path() / "missing" / "seed.iso";
  const auto status = write_nocloud_seed(iso, valid_seed());
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().code == ErrorCode::io_error);
  CHECK(mentions(status.error(), iso.string()));
  CHECK(directory_empty(dir.path()));
}

TEST_CASE("a path that is a directory is an io_error naming it, and the temporary file is removed") {
  TempDir dir;
  const auto iso = dir.path() / "seed.iso";
  fs::create_directory(iso);
  const auto status = write_nocloud_seed(iso, valid_seed());
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().code == ErrorCode::io_error);
  CHECK(mentions(status.error(), "rename"));
  CHECK(mentions(status.error(), iso.string()));
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(dir.path())) entries.push_back(entry.path().filename().string());
  CHECK(entries == std::vector<std::string>{"seed.iso"});
  CHECK(fs::is_directory(iso));
}

}  // namespace
TEST_CASE("vendor file paths are absolute, of a plain character set, without '.' or '..', each once") {
  auto seed = valid_seed();
  const auto path_refused = [&](const std::string& path, const std::string& why) {
    CAPTURE(path);
    seed.vendor_files = {{path, "x", ""}};
    CHECK(refused(seed).message == "vendor file 0 path '" + path + "' " + why);
  };
  path_refused("etc/nccl.conf", "is not an absolute path to a file");
  path_refused("/etc/nccl/", "is not an absolute path to a file");
  path_refused("/etc/nccl conf", "has a character outside A-Z a-z 0-9 . _ - /");
  path_refused("/etc/it's", "has a character outside A-Z a-z 0-9 . _ - /");
  path_refused("/etc/$(id)", "has a character outside A-Z a-z 0-9 . _ - /");
  path_refused("/etc/../root/x", "has an empty, '.' or '..' component");
  path_refused("/etc//x", "has an empty, '.' or '..' component");
  seed.vendor_files = {{"/etc/a", "x", ""}, {"/etc/a", "y", ""}};
  CHECK(refused(seed).message == "vendor file 1 path '/etc/a' is given twice");
  seed.vendor_files = {{"/etc/nccl/hostagent-topology.xml", "x", ""}, {"/etc/nccl.conf", "y", ""}};
  TempDir dir;
  CHECK(write_nocloud_seed(dir.path() / "seed.iso", seed).ok());
}

TEST_CASE("a vendor file's reload module is a module name, never a word the shell would read") {
  auto seed = valid_seed();
  for (const std::string& module :
       std::vector<std::string>{"nvidia;reboot", "Nvidia", "nvidia-uvm", "$(id)", std::string(56, 'a')}) {
    CAPTURE(module);
    seed.vendor_files = {{"/etc/modprobe.d/x.conf", "options x y=1\n", module}};
    CHECK(refused(seed).message == "vendor file 0 reload module '" + module + "' is not a module name (a-z 0-9 _)");
  }
  seed.vendor_files = {{"/etc/modprobe.d/x.conf", "options x y=1\n", "nvidia_uvm"}};
  TempDir dir;
  CHECK(write_nocloud_seed(dir.path() / "seed.iso", seed).ok());
}

}  // namespace hostagent::cloudinit::testing
