// virt/handles: owning wrappers for libvirt's reference-counted objects, so an early return never
// leaks a virDomainPtr and a call racing a reconnect keeps its connection alive (virConnectClose
// only drops a reference; libvirt frees the connection with the last one).
#pragma once

#include <libvirt/libvirt.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace hostagent::virt::detail {

// One libvirt reference shared by every holder; the last holder's release calls virConnectClose.
using ConnPtr = std::shared_ptr<virConnect>;
inline ConnPtr adopt_connection(virConnectPtr conn) {
  return ConnPtr(conn, [](virConnectPtr c) { virConnectClose(c); });
}

struct DomainFree {
  void operator()(virDomainPtr d) const { virDomainFree(d); }
};
struct PoolFree {
  void operator()(virStoragePoolPtr p) const { virStoragePoolFree(p); }
};
struct VolumeFree {
  void operator()(virStorageVolPtr v) const { virStorageVolFree(v); }
};
struct MallocFree {
  void operator()(char* s) const { std::free(s); }  // NOLINT(cppcoreguidelines-no-malloc)
};

using DomainPtr = std::unique_ptr<virDomain, DomainFree>;
using PoolPtr = std::unique_ptr<virStoragePool, PoolFree>;
using VolumePtr = std::unique_ptr<virStorageVol, VolumeFree>;
// Strings libvirt allocates for the caller (XML descriptions, metadata, paths).
using LibvirtString = std::unique_ptr<char, MallocFree>;

inline std::string take_string(char* s) {
  const LibvirtString owned(s);
  return owned ? std::string(owned.get()) : std::string();
}

}  // namespace hostagent::virt::detail
