// virt/storage_calls: a VM's disk as a qcow2 overlay volume over a shared image, in a libvirt pool.
#include <libvirt/virterror.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <pugixml.hpp>

#include "backing_image.hpp"
#include "hostagent/common/text.hpp"
#include "libvirt_error.hpp"
#include "libvirt_hypervisor.hpp"

namespace hostagent::virt::detail {
namespace {

Result<PoolPtr> find_pool(const ConnPtr& conn, const std::string& name, const std::string& what) {
  PoolPtr pool(virStoragePoolLookupByName(conn.get(), name.c_str()));
  if (!pool) return last_call_error(conn.get(), what);
  return pool;
}

// nullptr (not an error) when the pool has no volume of that name.
Result<VolumePtr> find_volume(const ConnPtr& conn, virStoragePoolPtr pool, const std::string& name,
                              const std::string& what) {
  VolumePtr volume(virStorageVolLookupByName(pool, name.c_str()));
  if (volume) return volume;
  const LibvirtError error = take_last_error();
  if (error.code == VIR_ERR_NO_STORAGE_VOL) return VolumePtr();
  return call_error(conn.get(), error, what);
}

// The pool's type and target path, from its XML (<pool type='dir'><target><path>).
struct PoolTarget {
  std::string type;
  std::string path;
};

Result<PoolTarget> pool_target(const ConnPtr& conn, virStoragePoolPtr pool, const std::string& what) {
  char* xml = virStoragePoolGetXMLDesc(pool, 0);
  if (xml == nullptr) return last_call_error(conn.get(), what);
  const std::string text = take_string(xml);
  pugi::xml_document doc;
  if (!doc.load_string(text.c_str()))
    return Error{ErrorCode::parse_error, what + ": libvirt's pool XML does not parse"};
  const auto node = doc.child("pool");
  return PoolTarget{node.attribute("type").as_string(), node.child("target").child("path").text().as_string()};
}

}  // namespace

Result<std::string> LibvirtHypervisor::volume_path(const std::string& pool_name, const std::string& volume_name) {
  const std::string what = "path of volume " + volume_name + " in pool " + pool_name;
  HA_TRY_STATUS(check_volume_name(volume_name));
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(PoolPtr pool, find_pool(conn, pool_name, what));
  HA_TRY(const auto target, pool_target(conn, pool.get(), what));
  static constexpr std::array<std::string_view, 3> kFilePools = {"dir", "fs", "netfs"};
  if (std::find(kFilePools.begin(), kFilePools.end(), target.type) == kFilePools.end() || target.path.empty()) {
    return Error{ErrorCode::unsupported, what + ": the pool is of type " + text::quoted(target.type) +
                                             ", whose volumes hostagent cannot locate before they exist; use a "
                                             "dir, fs or netfs pool for VM disks (storage.pool)"};
  }
  return target.path + "/" + volume_name;
}

Result<std::string> LibvirtHypervisor::create_overlay(const std::string& pool_name, const std::string& volume_name,
                                                      const std::string& backing_path) {
  const std::string what = "create volume " + volume_name + " in pool " + pool_name + " over " + backing_path;
  HA_TRY_STATUS(check_volume_name(volume_name));
  HA_TRY(const BackingImage backing, inspect_backing_image(backing_path));
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(PoolPtr pool, find_pool(conn, pool_name, what));
  // libvirt's own answer differs by driver (storage driver: VIR_ERR_STORAGE_VOL_EXIST; test driver:
  // OPERATION_FAILED), so look first; a volume created in between still fails in libvirt.
  HA_TRY(VolumePtr existing, find_volume(conn, pool.get(), volume_name, what));
  if (existing) {
    return Error{ErrorCode::conflict,
                 what + ": the pool already has a volume of that name (delete it or pick another)"};
  }
  const std::string xml = overlay_volume_xml(volume_name, backing_path, backing);
  const VolumePtr volume(virStorageVolCreateXML(pool.get(), xml.c_str(), 0));
  if (!volume) return last_call_error(conn.get(), what);
  char* path = virStorageVolGetPath(volume.get());
  if (path == nullptr) return last_call_error(conn.get(), what);
  return take_string(path);
}

Status LibvirtHypervisor::delete_volume(const std::string& pool_name, const std::string& volume_name) {
  const std::string what = "delete volume " + volume_name + " in pool " + pool_name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(PoolPtr pool, find_pool(conn, pool_name, what));
  HA_TRY(VolumePtr volume, find_volume(conn, pool.get(), volume_name, what));
  if (!volume) return ok_status();
  if (virStorageVolDelete(volume.get(), 0) == 0) return ok_status();
  const LibvirtError error = take_last_error();
  if (error.code == VIR_ERR_NO_STORAGE_VOL) return ok_status();  // deleted by someone else meanwhile
  return call_error(conn.get(), error, what);
}

Result<std::vector<std::string>> LibvirtHypervisor::list_volumes(const std::string& pool_name) {
  const std::string what = "list volumes in pool " + pool_name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(PoolPtr pool, find_pool(conn, pool_name, what));
  virStorageVolPtr* raw = nullptr;
  const int count = virStoragePoolListAllVolumes(pool.get(), &raw, 0);
  if (count < 0) return last_call_error(conn.get(), what);
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const VolumePtr volume(raw[i]);
    const char* name = virStorageVolGetName(volume.get());
    if (name != nullptr) names.emplace_back(name);
  }
  std::free(raw);  // NOLINT(cppcoreguidelines-no-malloc): libvirt allocated the array
  return names;
}

}  // namespace hostagent::virt::detail
