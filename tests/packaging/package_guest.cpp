// package_guest: what scripts/package.sh needs to run a VM through a package upgrade, made with the
// suites' own test guest. The packaged hostagentd runs in a container, a stock Debian 12 root, on
// that root's own libvirtd and QEMU; this program reaches that libvirtd through its socket
// ($HOSTAGENT_LIBVIRTD_URI). The guest's files, its disk pool and its console log lie in DIR, which
// the container sees at the same path, so that both sides name the same files.
//
// A doctest program (the suites' main and checks), run by the script with the directory in
// $HOSTAGENT_PACKAGE_VM_DIR, never by CTest:
//   package_guest -tc=prepare   the guest (kernel, initramfs, a disk image), its template
//                               (DIR/templates/ci-guest.yaml), DIR/console, a transient storage
//                               pool at DIR/pool and DIR/hostagent.yaml, hostagentd's configuration
//                               for them on $HOSTAGENT_LIBVIRTD_URI (the script points it at
//                               qemu:///system, the container's own)
//   package_guest -tc=cleanup   the pool, and any domain still named pkg-*, gone
// A machine that cannot run the guest (no libvirtd, no kernel or busybox) prints "SKIPPED: why".
#include <doctest/doctest.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "libvirtd_support.hpp"
#include "test_guest.hpp"

namespace fs = std::filesystem;

namespace {

constexpr const char* kPool = "hostagent-package-pool";
constexpr const char* kTemplate = "ci-guest";

fs::path vm_dir() {
  const char* dir = std::getenv("HOSTAGENT_PACKAGE_VM_DIR");
  REQUIRE_MESSAGE((dir != nullptr && *dir == '/'), "HOSTAGENT_PACKAGE_VM_DIR must name an absolute directory");
  return dir;
}

struct Connection {
  virConnectPtr conn = nullptr;
  explicit Connection(const std::string& uri) : conn(virConnectOpen(uri.c_str())) {
    REQUIRE_MESSAGE(conn != nullptr, "cannot connect to " << uri << ": " << virGetLastErrorMessage());
  }
  ~Connection() { virConnectClose(conn); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
};

void destroy_pool(virConnectPtr conn) {
  if (virStoragePoolPtr old = virStoragePoolLookupByName(conn, kPool)) {
    virStoragePoolDestroy(old);
    virStoragePoolFree(old);
  }
}

std::string config_yaml(const std::string& uri, const fs::path& dir) {
  return "# hostagentd in scripts/package.sh's container, on the container's libvirtd (package_guest)\n"
         "libvirt:\n  uri: " +
         uri + "\n  domain_type: qemu\n  connect_timeout: 60s\n" + "host:\n  sysfs_root: /\n" +
         "templates:\n  directories: [" + (dir / "templates").string() + "]\n" + "storage:\n  pool: " + kPool + "\n" +
         "console_log_directory: " + (dir / "console").string() + "\n" + "operations:\n  stop_timeout: 60s\n";
}

}  // namespace

TEST_CASE("prepare") {
  const auto uri = hostagent::testing::libvirtd_uri_or_skip();
  if (!uri) return;
  const fs::path dir = vm_dir();
  fs::create_directories(dir);
  // QEMU runs as libvirt-qemu: it walks into DIR for the kernel, the initramfs and the disk.
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  const auto guest = hostagent::testing::build_test_guest(dir);
  if (!guest) return;  // build_test_guest said why (SKIPPED: ...)
  for (const char* sub : {"templates", "console", "pool"}) fs::create_directories(dir / sub);
  hostagent::testing::write_test_guest_template(dir / "templates", kTemplate, *guest,
                                                hostagent::testing::write_test_guest_image(dir));
  std::ofstream(dir / "hostagent.yaml") << config_yaml(*uri, dir);
  const Connection libvirt(*uri);
  destroy_pool(libvirt.conn);
  const std::string pool_xml = std::string("<pool type='dir'><name>") + kPool + "</name><target><path>" +
                               (dir / "pool").string() + "</path></target></pool>";
  virStoragePoolPtr pool = virStoragePoolCreateXML(libvirt.conn, pool_xml.c_str(), 0);
  REQUIRE_MESSAGE(pool != nullptr, "cannot create the storage pool: " << virGetLastErrorMessage());
  virStoragePoolFree(pool);
  std::cout << "package_guest: " << dir.string() << " ready: template " << kTemplate << ", pool " << kPool << "\n";
}

TEST_CASE("cleanup") {
  const auto uri = hostagent::testing::libvirtd_uri_or_skip();
  if (!uri) return;
  const Connection libvirt(*uri);
  virDomainPtr* domains = nullptr;
  const int count = virConnectListAllDomains(libvirt.conn, &domains, 0);
  for (int i = 0; i < count; ++i) {
    if (std::string(virDomainGetName(domains[i])).rfind("pkg-", 0) == 0) {
      virDomainDestroy(domains[i]);
      virDomainUndefineFlags(domains[i], VIR_DOMAIN_UNDEFINE_NVRAM);
    }
    virDomainFree(domains[i]);
  }
  std::free(domains);  // NOLINT(cppcoreguidelines-no-malloc): libvirt's array
  destroy_pool(libvirt.conn);
}
