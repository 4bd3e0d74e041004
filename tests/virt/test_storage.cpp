// Overlay volumes in test:///default's pool "default-pool". The test driver records a volume's
// backing store and capacity without writing files, so these tests read the volume back through
// libvirt (a second connection shares the driver's state); the real files are checked against
// libvirtd in test_libvirtd_overlay.cpp.
#include <libvirt/libvirt.h>

#include <doctest/doctest.h>
#include <algorithm>
#include <array>
#include <fstream>
#include <pugixml.hpp>

#include "test_support.hpp"
#include "virt_fixture.hpp"

namespace hostagent::testing {
namespace {

constexpr const char* kPool = "default-pool";

void write_raw_image(const std::filesystem::path& path, std::size_t size) {
  std::ofstream out(path, std::ios::binary);
  const std::string block(size, '\0');
  out.write(block.data(), static_cast<std::streamsize>(block.size()));
}

// The first bytes of a qcow2 v3 image: magic, version, no backing file, cluster bits, virtual size.
void write_qcow2_header(const std::filesystem::path& path, std::uint64_t virtual_size) {
  std::array<unsigned char, 512> header{};
  const std::array<unsigned char, 8> magic_version{'Q', 'F', 'I', 0xfb, 0, 0, 0, 3};
  std::copy(magic_version.begin(), magic_version.end(), header.begin());
  header[23] = 16;  // cluster_bits
  for (int i = 0; i < 8; ++i) header[24 + i] = static_cast<unsigned char>(virtual_size >> (56 - 8 * i));
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), header.size());
}

struct VolumeDescription {
  std::string format;
  std::uint64_t capacity = 0;
  std::string backing_path;
  std::string backing_format;
};

// The volume as libvirt records it, read over a connection of the test's own.
VolumeDescription describe_volume(const std::string& name) {
  virConnectPtr conn = virConnectOpen(kTestUri);
  REQUIRE(conn != nullptr);
  virStoragePoolPtr pool = virStoragePoolLookupByName(conn, kPool);
  virStorageVolPtr volume = pool != nullptr ? virStorageVolLookupByName(pool, name.c_str()) : nullptr;
  char* xml = volume != nullptr ? virStorageVolGetXMLDesc(volume, 0) : nullptr;
  pugi::xml_document doc;
  const bool parsed = xml != nullptr && doc.load_string(xml);
  std::free(xml);
  if (volume != nullptr) virStorageVolFree(volume);
  if (pool != nullptr) virStoragePoolFree(pool);
  virConnectClose(conn);
  REQUIRE(parsed);
  const pugi::xml_node root = doc.child("volume");
  return VolumeDescription{root.child("target").child("format").attribute("type").as_string(),
                           root.child("capacity").text().as_ullong(), root.child("backingStore").child_value("path"),
                           root.child("backingStore").child("format").attribute("type").as_string()};
}

struct VolumeGuard {
  virt::Hypervisor& hypervisor;
  std::string name;
  ~VolumeGuard() { (void)hypervisor.delete_volume(kPool, name); }
};

}  // namespace

TEST_CASE("create_overlay over a raw image makes a qcow2 volume of the image's size backed by it") {
  auto hv = connect_hypervisor(kTestUri);
  const TempDir dir;
  const auto base = dir.path() / "base.img";
  write_raw_image(base, 3 * kMiB);
  const std::string name = unique_name("raw") + ".qcow2";
  const VolumeGuard guard{*hv, name};

  auto path = hv->create_overlay(kPool, name, base.string());
  REQUIRE_MESSAGE(path.ok(), path.error().message);
  CHECK(path.value() == std::string("/default-pool/") + name);
  const VolumeDescription volume = describe_volume(name);
  CHECK(volume.format == "qcow2");
  CHECK(volume.capacity == 3 * kMiB);
  CHECK(volume.backing_path == base.string());
  CHECK(volume.backing_format == "raw");

  auto names = hv->list_volumes(kPool);
  REQUIRE(names.ok());
  CHECK(std::find(names->begin(), names->end(), name) != names->end());
}

TEST_CASE("create_overlay over a qcow2 image takes the virtual size from its header") {
  auto hv = connect_hypervisor(kTestUri);
  const TempDir dir;
  const auto base = dir.path() / "base.qcow2";
  const std::uint64_t five_gib = 5ULL << 30;
  write_qcow2_header(base, five_gib);  // a 512-byte file: the size cannot come from the file
  const std::string name = unique_name("qcow2") + ".qcow2";
  const VolumeGuard guard{*hv, name};

  auto path = hv->create_overlay(kPool, name, base.string());
  REQUIRE_MESSAGE(path.ok(), path.error().message);
  const VolumeDescription volume = describe_volume(name);
  CHECK(volume.capacity == five_gib);
  CHECK(volume.backing_format == "qcow2");
}

TEST_CASE("create_overlay of an existing volume is conflict") {
  auto hv = connect_hypervisor(kTestUri);
  const TempDir dir;
  const auto base = dir.path() / "base.img";
  write_raw_image(base, kMiB);
  const std::string name = unique_name("twice") + ".qcow2";
  const VolumeGuard guard{*hv, name};
  REQUIRE(hv->create_overlay(kPool, name, base.string()).ok());
  auto again = hv->create_overlay(kPool, name, base.string());
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::conflict);
  CHECK(again.error().message.find(name) != std::string::npos);
}

TEST_CASE("delete_volume removes the volume and is ok once it is gone") {
  auto hv = connect_hypervisor(kTestUri);
  const TempDir dir;
  const auto base = dir.path() / "base.img";
  write_raw_image(base, kMiB);
  const std::string name = unique_name("delete") + ".qcow2";
  REQUIRE(hv->create_overlay(kPool, name, base.string()).ok());

  REQUIRE(hv->delete_volume(kPool, name).ok());
  auto names = hv->list_volumes(kPool);
  REQUIRE(names.ok());
  CHECK(std::find(names->begin(), names->end(), name) == names->end());
  const auto again = hv->delete_volume(kPool, name);
  CHECK_MESSAGE(again.ok(), again.error().message);
}

TEST_CASE("create_overlay refuses bad names, missing images and missing pools") {
  auto hv = connect_hypervisor(kTestUri);
  const TempDir dir;
  const auto base = dir.path() / "base.img";
  write_raw_image(base, kMiB);

  for (const std::string bad : {"", "..", "a/b", "../escape.qcow2"}) {
    CAPTURE(bad);
    auto refused = hv->create_overlay(kPool, bad, base.string());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::invalid_argument);
  }
  auto missing_image = hv->create_overlay(kPool, unique_name("x"), (dir.path() / "absent.img").string());
  REQUIRE_FALSE(missing_image.ok());
  CHECK(missing_image.error().code == ErrorCode::not_found);
  auto relative = hv->create_overlay(kPool, unique_name("x"), "base.img");
  REQUIRE_FALSE(relative.ok());
  CHECK(relative.error().code == ErrorCode::invalid_argument);

  const std::string pool = unique_name("no-such-pool");
  auto missing_pool = hv->create_overlay(pool, unique_name("x"), base.string());
  REQUIRE_FALSE(missing_pool.ok());
  CHECK(missing_pool.error().code == ErrorCode::not_found);
  CHECK(missing_pool.error().message.find(pool) != std::string::npos);
  CHECK(hv->list_volumes(pool).error().code == ErrorCode::not_found);
  CHECK(hv->delete_volume(pool, "x").error().code == ErrorCode::not_found);
}

}  // namespace hostagent::testing
