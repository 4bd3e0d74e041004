// NoCloud seeds as cloud-init reads them: the volume label, the two file names in both the Rock
// Ridge and the Joliet tree, meta-data and generated user-data as YAML, user data byte for byte,
// atomic replacement, and cross-checks with blkid and isoinfo when they are installed.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hostagent/cloudinit/nocloud_seed.hpp"
#include "iso_reader.hpp"
#include "test_support.hpp"

namespace hostagent::cloudinit::testing {
namespace {

using hostagent::testing::TempDir;
namespace fs = std::filesystem;

const std::string kEd25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGd3cmVkZW50aWFsc2FyZW5vdGhlcmVhdGFsbA alice@laptop";
// A comment with quotes, a colon-space, a '#' and a backslash: each would change the meaning of
// YAML text spliced together by hand.
const std::string kTrickyComment =
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTY= bob \"ops\": key #2, 'x' \\ - [y]";
const std::string kRsa = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7+/abc==";

NoCloudSeed keys_seed() {
  NoCloudSeed seed;
  seed.instance_id = "6f3b8c1e-2a4d-4e5f-9a0b-1c2d3e4f5a6b";
  seed.hostname = "train-0";
  seed.ssh_authorized_keys = {kEd25519, kTrickyComment, kRsa};
  return seed;
}

IsoContents write_and_read(const fs::path& iso, const NoCloudSeed& seed, Tree tree = Tree::rock_ridge) {
  const auto status = write_nocloud_seed(iso, seed);
  REQUIRE_MESSAGE(status.ok(), (status.ok() ? "" : status.error().message));
  return read_iso(iso, tree);
}

std::vector<std::string> names(const IsoContents& contents) {
  std::vector<std::string> out;
  for (const auto& [name, data] : contents.files) out.push_back(name);
  return out;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

TEST_CASE("a seed is volume cidata with exactly meta-data and user-data, in the Rock Ridge and the Joliet tree") {
  TempDir dir;
  const auto iso = dir.path() / "seed.iso";
  const auto rr = write_and_read(iso, keys_seed(), Tree::rock_ridge);
  CHECK(rr.volume_id == "cidata");
  CHECK(rr.rock_ridge);
  CHECK(names(rr) == std::vector<std::string>{"meta-data", "user-data"});
  CHECK(rr.directories == 0);
  CHECK(fs::file_size(iso) % 2048 == 0);

  // A guest without Rock Ridge support (or a blkid/mount preferring Joliet) sees the same names.
  const auto joliet = read_iso(iso, Tree::joliet);
  CHECK(joliet.joliet);
  CHECK(names(joliet) == std::vector<std::string>{"meta-data", "user-data"});
  CHECK(joliet.files == rr.files);
  // Plain ISO 9660 names are mangled, which is why the extensions are there at all.
  const auto plain = read_iso(iso, Tree::iso9660);
  CHECK(plain.files.size() == 2);
  CHECK(plain.files.count("user-data") == 0);
}

TEST_CASE("meta-data is YAML with the instance id and the hostname, quoted so YAML 1.1 keeps them strings") {
  TempDir dir;
  auto seed = keys_seed();
  seed.hostname = "12345";  // a number to a YAML 1.1 reader (cloud-init's PyYAML) if left plain
  const auto contents = write_and_read(dir.path() / "seed.iso", seed);
  const auto meta = YAML::Load(contents.files.at("meta-data"));
  REQUIRE(meta.IsMap());
  CHECK(meta.size() == 2);
  CHECK(meta["instance-id"].as<std::string>() == seed.instance_id);
  CHECK(meta["local-hostname"].as<std::string>() == "12345");
  // yaml-cpp tags a quoted scalar "!" (non-specific, never resolved to int/bool/null) and a plain one "?".
  CHECK(meta["local-hostname"].Tag() == "!");
  CHECK(meta["instance-id"].Tag() == "!");
}

TEST_CASE("generated user-data is #cloud-config YAML listing exactly the keys given, comments escaped") {
  TempDir dir;
  const auto seed = keys_seed();
  const auto contents = write_and_read(dir.path() / "seed.iso", seed);
  const auto& user_data = contents.files.at("user-data");
  CHECK(first_line(user_data) == "#cloud-config");
  const auto doc = YAML::Load(user_data);
  REQUIRE(doc.IsMap());
  CHECK(doc.size() == 1);
  const auto keys = doc["ssh_authorized_keys"];
  REQUIRE(keys.IsSequence());
  std::vector<std::string> read_back;
  for (const auto& key : keys) read_back.push_back(key.as<std::string>());
  CHECK(read_back == seed.ssh_authorized_keys);
  // Nothing of the comment escaped the string it belongs to.
  CHECK(user_data.find("\n\"ops\"") == std::string::npos);
}

TEST_CASE("without keys or user data, user-data is an empty cloud-config document") {
  TempDir dir;
  auto seed = keys_seed();
  seed.ssh_authorized_keys.clear();
  const auto contents = write_and_read(dir.path() / "seed.iso", seed);
  const auto& user_data = contents.files.at("user-data");
  CHECK(first_line(user_data) == "#cloud-config");
  const auto doc = YAML::Load(user_data);
  CHECK(doc.IsMap());
  CHECK(doc.size() == 0);
  CHECK(contents.files.count("meta-data") == 1);  // cloud-init needs both files to take the seed
}

TEST_CASE("with a VF MTU, network-config (version 2) names each VF by MAC with its MTU, DHCP on and optional") {
  TempDir dir;
  auto seed = keys_seed();
  seed.nics = {{"02:1a:2b:3c:4d:00", 9000}, {"02:1a:2b:3c:4d:01", 9000}};
  const auto contents = write_and_read(dir.path() / "seed.iso", seed);
  CHECK(names(contents) == std::vector<std::string>{"meta-data", "network-config", "user-data"});
  const auto doc = YAML::Load(contents.files.at("network-config"));
  REQUIRE(doc.IsMap());
  CHECK(doc.size() == 2);
  CHECK(doc["version"].as<int>() == 2);
  const auto ethernets = doc["ethernets"];
  REQUIRE(ethernets.IsMap());
  REQUIRE(ethernets.size() == 2);
  for (std::size_t i = 0; i < seed.nics.size(); ++i) {
    const auto nic = ethernets["vf" + std::to_string(i)];
    REQUIRE(nic.IsMap());
    CHECK(nic["match"]["macaddress"].as<std::string>() == seed.nics[i].mac);
    CHECK(nic["match"]["macaddress"].Tag() == "!");  // quoted: a MAC of digits stays a string
    CHECK(nic["mtu"].as<int>() == 9000);
    CHECK(nic["dhcp4"].as<bool>());
    CHECK(nic["optional"].as<bool>());
    CHECK_FALSE(nic["set-name"]);  // the guest keeps its own names
  }
  // The Joliet tree has it too.
  CHECK(read_iso(dir.path() / "seed.iso", Tree::joliet).files == contents.files);

  // Without an MTU the seed carries none: the image's or cloud-init's fallback decides.
  seed.nics = {{"02:1a:2b:3c:4d:00", std::nullopt}};
  CHECK(names(write_and_read(dir.path() / "other.iso", seed)) == std::vector<std::string>{"meta-data", "user-data"});
}

TEST_CASE("vendor-data carries the host's files as a script that writes them byte for byte, run by a real shell") {
  TempDir dir;
  auto seed = keys_seed();
  // The guest's paths, here below the test's directory so the script can run on this machine.
  const auto root = dir.path() / "guest";
  const std::string topology = (root / "etc/nccl/hostagent-topology.xml").string();
  const std::string conf = (root / "etc/nccl.conf").string();
  std::string tricky = "<system version=\"1\"><!-- 'quotes' $HOME `id` \\ -->\nHOSTAGENT_FILE\n</system>\n";
  tricky += std::string("\0\xff\x01 no newline at the end", 25);
  seed.vendor_files = {{topology, tricky, ""}, {conf, "NCCL_TOPO_FILE=/etc/nccl/hostagent-topology.xml\n", ""}};
  const auto contents = write_and_read(dir.path() / "seed.iso", seed);
  CHECK(names(contents) == std::vector<std::string>{"meta-data", "user-data", "vendor-data"});
  const auto& script = contents.files.at("vendor-data");
  CHECK(first_line(script) == "#!/bin/sh");
  CHECK(script.find("$HOME") == std::string::npos);  // the content travels encoded
  const auto path = dir.path() / "vendor-data.sh";
  std::ofstream(path) << script;
  const auto run = hostagent::testing::run_command({"/bin/sh", path.string()});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(hostagent::testing::read_text_file(topology) == tricky);
  CHECK(hostagent::testing::read_text_file(conf) == seed.vendor_files[1].content);
  CHECK_FALSE(fs::exists(topology + ".hostagent-new"));
  // User data stays the user's: the vendor's files never enter it.
  CHECK(contents.files.at("user-data").find("nccl") == std::string::npos);
  // No vendor files, no vendor-data.
  seed.vendor_files.clear();
  CHECK(names(write_and_read(dir.path() / "plain.iso", seed)) == std::vector<std::string>{"meta-data", "user-data"});
}

// The guest's modprobe and /sys/module are faked: a module loaded before its options were written is
// unloaded with its holders and loaded again, and one in use is left for the next boot, saying so.
TEST_CASE("vendor-data loads a module again after writing its options, with its holders, unless it is in use") {
  TempDir dir;
  auto seed = keys_seed();
  const auto conf = dir.path() / "guest/etc/modprobe.d/hostagent-nvidia.conf";
  seed.vendor_files = {{conf.string(), "options nvidia NVreg_NvLinkDisable=1\n", "nvidia"}};
  const auto script_path = dir.path() / "vendor-data.sh";
  std::ofstream(script_path) << write_and_read(dir.path() / "seed.iso", seed).files.at("vendor-data");
  const auto bin = dir.path() / "bin";
  fs::create_directories(bin);
  const auto calls = dir.path() / "modprobe-calls";
  // A modprobe that records its arguments and, with FAIL_REMOVE set, fails to remove (a module in use).
  std::ofstream(bin / "modprobe") << "#!/bin/sh\necho \"$*\" >> " << calls.string()
                                  << "\n[ \"$1\" = -r ] && [ -n \"${FAIL_REMOVE:-}\" ] && exit 1\nexit 0\n";
  fs::permissions(bin / "modprobe", fs::perms::owner_all);
  const auto sysfs = dir.path() / "sys";
  const auto run = [&](const std::string& fail_remove) {
    fs::remove(calls);
    return hostagent::testing::run_command({"env", "PATH=" + bin.string() + ":/usr/bin:/bin",
                                            "HOSTAGENT_SYSFS=" + sysfs.string(), "FAIL_REMOVE=" + fail_remove,
                                            "/bin/sh", script_path.string()});
  };

  // Not loaded: the file is written and modprobe never runs.
  auto result = run("");
  REQUIRE(result.exit_code == 0);
  CHECK(hostagent::testing::read_text_file(conf.string()) == "options nvidia NVreg_NvLinkDisable=1\n");
  CHECK_FALSE(fs::exists(calls));

  // Loaded, held by two modules: all three out, then in again.
  fs::create_directories(sysfs / "module/nvidia/holders/nvidia_modeset");
  fs::create_directories(sysfs / "module/nvidia/holders/nvidia_uvm");
  result = run("");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(hostagent::testing::read_text_file(calls.string()) ==
        "-r nvidia_modeset nvidia_uvm nvidia\n-a nvidia nvidia_modeset nvidia_uvm\n");
  CHECK(result.output.find("hostagent: module nvidia loaded again with its options") != std::string::npos);

  // In use: left loaded, the script still succeeds, and says when the options take hold.
  result = run("1");
  REQUIRE(result.exit_code == 0);
  CHECK(hostagent::testing::read_text_file(calls.string()) == "-r nvidia_modeset nvidia_uvm nvidia\n");
  CHECK(result.output.find("hostagent: module nvidia is in use: its options hold from the next boot") !=
        std::string::npos);
}

TEST_CASE("user data is written byte for byte: cloud-config, a script, binary (gzip) data, 64 KiB") {
  TempDir dir;
  auto seed = keys_seed();
  seed.ssh_authorized_keys.clear();
  std::string binary("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  for (int i = 0; i < 3000; ++i) binary += static_cast<char>((i * 7919) & 0xff);  // every byte value, NULs too
  std::string largest(kMaxUserDataBytes, 'x');
  largest.front() = '#';
  const std::vector<std::string> payloads{
      "#cloud-config\nusers:\n  - name: ops\n    ssh_authorized_keys: [\"" + kEd25519 + "\"]\nruncmd: [[touch, /ok]]\n",
      "#!/bin/sh\necho 'hello: world' > /etc/motd\n", binary, largest};
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    CAPTURE(i);
    seed.user_data = payloads[i];
    const auto contents = write_and_read(dir.path() / "seed.iso", seed);
    CHECK(contents.files.at("user-data") == payloads[i]);
    CHECK(YAML::Load(contents.files.at("meta-data"))["local-hostname"].as<std::string>() == seed.hostname);
  }
}

const std::string kTemplatePart =
    "#cloud-config\nwrite_files:\n  - path: /etc/sysctl.d/90-hostagent-training.conf\n    content: |\n"
    "      net.ipv4.tcp_timestamps = 0\n";

TEST_CASE("the template's cloud-init and the request's join as one MIME multipart, the template's first") {
  TempDir dir;
  auto seed = keys_seed();
  seed.template_user_data = kTemplatePart;
  const auto user_data = write_and_read(dir.path() / "seed.iso", seed).files.at("user-data");
  // Python's email parser, which cloud-init itself uses (cloudinit/user_data.py), reads it back.
  const auto parsed = hostagent::testing::run_command(
      {"python3", "-c",
       "import email, sys\n"
       "m = email.message_from_string(sys.argv[1])\n"
       "assert m.is_multipart(), 'not multipart'\n"
       "for p in m.get_payload():\n"
       "    print(p.get_content_type(), p.get_filename(), p.get('Merge-Type'), repr(p.get_payload()[:13]))\n",
       user_data});
  REQUIRE_MESSAGE(parsed.exit_code == 0, parsed.output);
  CHECK(parsed.output ==
        "text/cloud-config template None '#cloud-config'\n"
        "text/cloud-config request list(append)+dict(recurse_array)+str() '#cloud-config'\n");
  CHECK(user_data.find(kTemplatePart) < user_data.find("ssh_authorized_keys"));

  // Only one side: that part alone, as given.
  seed.ssh_authorized_keys.clear();
  CHECK(seed_user_data(seed).value() == kTemplatePart);
  seed.template_user_data.clear();
  seed.user_data = "#!/bin/sh\necho hi\n";
  CHECK(seed_user_data(seed).value() == seed.user_data);
}

TEST_CASE("user data that cannot be joined with the template's is refused naming user_data, and a script joins") {
  auto seed = keys_seed();
  seed.ssh_authorized_keys.clear();
  seed.template_user_data = kTemplatePart;
  for (const std::string& given : {std::string("Content-Type: multipart/mixed; boundary=x\n\n--x--\n"),
                                   std::string("\x1f\x8b\x08\x00", 4), std::string("just text\n")}) {
    seed.user_data = given;
    const auto refused = seed_user_data(seed);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::invalid_argument);
    CHECK(refused.error().field == "user_data");
    CHECK(refused.error().message.find("must start with a cloud-init header") != std::string::npos);
  }
  seed.user_data = "#!/bin/sh\necho hi\n";
  const auto joined = seed_user_data(seed);
  REQUIRE_MESSAGE(joined.ok(), joined.error().message);
  CHECK(joined->find("Content-Type: text/x-shellscript") != std::string::npos);
}

TEST_CASE("rewriting a seed replaces it whole: mode 0600, no temporary file left behind") {
  TempDir dir;
  const auto iso = dir.path() / "seed.iso";
  auto seed = keys_seed();
  write_and_read(iso, seed);
  seed.hostname = "train-1";
  seed.ssh_authorized_keys = {kRsa};
  const auto contents = write_and_read(iso, seed);
  CHECK(YAML::Load(contents.files.at("meta-data"))["local-hostname"].as<std::string>() == "train-1");
  CHECK(YAML::Load(contents.files.at("user-data"))["ssh_authorized_keys"].size() == 1);
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(dir.path())) entries.push_back(entry.path().filename().string());
  CHECK(entries == std::vector<std::string>{"seed.iso"});
  struct stat st {};
  REQUIRE(::stat(iso.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("seeds written from several threads at once are each whole and their own") {
  TempDir dir;
  constexpr int kThreads = 4;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto seed = keys_seed();
      seed.hostname = "vm-" + std::to_string(t);
      for (int round = 0; round < 5; ++round) {
        const auto status = write_nocloud_seed(dir.path() / (seed.hostname + ".iso"), seed);
        if (!status.ok()) errors[t] = status.error().message;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    CAPTURE(t);
    CHECK(errors[t].empty());
    const auto contents = read_iso(dir.path() / ("vm-" + std::to_string(t) + ".iso"));
    CHECK(YAML::Load(contents.files.at("meta-data"))["local-hostname"].as<std::string>() == "vm-" + std::to_string(t));
  }
}

// cloud-init finds the seed by its label through blkid (util-linux), so this is the check that counts.
TEST_CASE("blkid, which cloud-init asks for LABEL=cidata, reads an iso9660 filesystem labelled cidata") {
  const auto blkid = hostagent::testing::find_program("blkid");
  if (!blkid) {
    hostagent::testing::skip("blkid is not installed (package util-linux)");
    return;
  }
  TempDir dir;
  const auto iso = dir.path() / "seed.iso";
  REQUIRE(write_nocloud_seed(iso, keys_seed()).ok());
  const auto probe = [&](const char* tag) {
    const auto result =
        hostagent::testing::run_command({blkid->string(), "-p", "-o", "value", "-s", tag, iso.string()});
    CHECK_MESSAGE(result.exit_code == 0, result.output);
    return result.output;
  };
  CHECK(probe("LABEL") == "cidata\n");
  CHECK(probe("TYPE") == "iso9660\n");
}

TEST_CASE("isoinfo (genisoimage) reads the same label, names and contents") {
  const auto isoinfo = hostagent::testing::find_program("isoinfo");
  if (!isoinfo) {
    hostagent::testing::skip("isoinfo is not installed (package genisoimage); libisofs's reader checked the rest");
    return;
  }
  TempDir dir;
  const auto iso = dir.path() / "seed.iso";
  const auto contents = write_and_read(iso, keys_seed());
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), isoinfo->string());
    args.insert(args.end(), {"-i", iso.string()});
    const auto result = hostagent::testing::run_command(args);
    CHECK_MESSAGE(result.exit_code == 0, result.output);
    return result.output;
  };
  CHECK(run({"-d"}).find("Volume id: cidata") != std::string::npos);
  const auto listing = run({"-R", "-f"});
  CHECK(listing.find("/meta-data") != std::string::npos);
  CHECK(listing.find("/user-data") != std::string::npos);
  CHECK(run({"-J", "-f"}).find("/user-data") != std::string::npos);
  CHECK(run({"-R", "-x", "/user-data"}) == contents.files.at("user-data"));
  CHECK(run({"-R", "-x", "/meta-data"}) == contents.files.at("meta-data"));
}

}  // namespace
}  // namespace hostagent::cloudinit::testing
