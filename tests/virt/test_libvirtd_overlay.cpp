// Overlay volumes in a transient dir pool of the real libvirtd: the file libvirt (qemu-img) writes
// must be qcow2 and name its backing file in its header.
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <doctest/doctest.h>
#include <algorithm>
#include <array>
#include <fstream>
#include <pugixml.hpp>
#include <sstream>

#include "libvirtd_support.hpp"
#include "test_support.hpp"
#include "virt_fixture.hpp"

namespace hostagent::testing {
namespace {

struct PoolCleanup {
  std::string uri;
  std::string name;
  ~PoolCleanup() { remove_pool(uri, name); }
};

// A transient dir pool over `dir`: gone when destroyed, nothing left in libvirt's configuration.
void create_pool(const std::string& uri, const std::string& name, const std::filesystem::path& dir) {
  pugi::xml_document doc;
  pugi::xml_node pool = doc.append_child("pool");
  pool.append_attribute("type").set_value("dir");
  pool.append_child("name").text().set(name.c_str());
  pool.append_child("target").append_child("path").text().set(dir.c_str());
  std::ostringstream xml;
  doc.save(xml);
  virConnectPtr conn = virConnectOpen(uri.c_str());
  REQUIRE(conn != nullptr);
  virStoragePoolPtr created = virStoragePoolCreateXML(conn, xml.str().c_str(), 0);
  const virErrorPtr error = virGetLastError();
  const std::string why = error != nullptr && error->message != nullptr ? error->message : "";
  if (created != nullptr) virStoragePoolFree(created);
  virConnectClose(conn);
  REQUIRE_MESSAGE(created != nullptr, "create pool " << name << ": " << why);
}

std::uint64_t big_endian(const std::string& bytes, std::size_t offset, int width) {
  std::uint64_t value = 0;
  for (int i = 0; i < width; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[offset + i]);
  return value;
}

struct Qcow2Header {
  bool magic = false;
  std::uint64_t virtual_size = 0;
  std::string backing_file;
};

Qcow2Header read_qcow2_header(const std::filesystem::path& path) {
  const std::string bytes = read_text_file(path).substr(0, 4096);
  Qcow2Header header;
  REQUIRE(bytes.size() >= 32);
  header.magic = bytes.compare(0, 4, std::string("QFI\xfb", 4)) == 0;
  const std::uint64_t offset = big_endian(bytes, 8, 8);
  const std::uint64_t size = big_endian(bytes, 16, 4);
  header.virtual_size = big_endian(bytes, 24, 8);
  if (offset != 0 && offset + size <= bytes.size()) header.backing_file = bytes.substr(offset, size);
  return header;
}

}  // namespace

TEST_CASE("create_overlay writes a qcow2 file over its backing image and delete_volume removes it") {
  const auto uri = libvirtd_uri_or_skip();
  if (!uri) return;
  auto hv = connect_hypervisor(*uri);
  const TempDir pool_dir;
  const TempDir image_dir;
  const std::string pool = unique_name("pool");
  const PoolCleanup cleanup{*uri, pool};
  create_pool(*uri, pool, pool_dir.path());

  const auto base = image_dir.path() / "base.img";
  const std::uint64_t base_size = std::uint64_t{3} << 20;
  std::ofstream(base, std::ios::binary) << std::string(base_size, '\0');

  auto path = hv->create_overlay(pool, "vm-root.qcow2", base.string());
  REQUIRE_MESSAGE(path.ok(), path.error().message);
  CHECK(std::filesystem::path(path.value()) == pool_dir.path() / "vm-root.qcow2");
  REQUIRE(std::filesystem::exists(path.value()));
  const Qcow2Header header = read_qcow2_header(path.value());
  CHECK(header.magic);
  CHECK(header.backing_file == base.string());
  CHECK(header.virtual_size == base_size);

  // An overlay over that overlay: the qcow2 base's size comes from its header, not its file size.
  auto second = hv->create_overlay(pool, "vm-second.qcow2", path.value());
  REQUIRE_MESSAGE(second.ok(), second.error().message);
  CHECK(read_qcow2_header(second.value()).virtual_size == base_size);
  CHECK(read_qcow2_header(second.value()).backing_file == path.value());

  auto conflict = hv->create_overlay(pool, "vm-root.qcow2", base.string());
  REQUIRE_FALSE(conflict.ok());
  CHECK(conflict.error().code == ErrorCode::conflict);

  auto names = hv->list_volumes(pool);
  REQUIRE(names.ok());
  CHECK(std::find(names->begin(), names->end(), "vm-root.qcow2") != names->end());
  CHECK(std::find(names->begin(), names->end(), "vm-second.qcow2") != names->end());

  REQUIRE(hv->delete_volume(pool, "vm-second.qcow2").ok());
  REQUIRE(hv->delete_volume(pool, "vm-root.qcow2").ok());
  CHECK_FALSE(std::filesystem::exists(path.value()));
  CHECK(hv->delete_volume(pool, "vm-root.qcow2").ok());
}

}  // namespace hostagent::testing
