# cmake/packaging.cmake: what the .deb and .rpm carry besides the binaries (installed by
# hostagent/CMakeLists.txt) and the shipped templates (vmtemplates/CMakeLists.txt), and CPack's
# settings for both. scripts/package.sh builds and checks them; docs/packaging.md describes them.
#
# Paths: relative destinations land under CPACK_PACKAGING_INSTALL_PREFIX (/usr); /etc and /var
# are absolute. `cmake --install` is meant for packages (a staging DESTDIR), not for a live system.

include(GNUInstallDirs)

set(HOSTAGENT_PACKAGE_RELEASE "1" CACHE STRING
    "Package release (the Debian revision and the RPM release) of this version")
set(HOSTAGENT_PACKAGE_MAINTAINER "hostagent <dev@hostagent.invalid>" CACHE STRING
    "Maintainer named in the packages")
# The repository states no license yet; change this (and packaging/copyright) when it does.
set(HOSTAGENT_PACKAGE_LICENSE "Proprietary" CACHE STRING "License named in the packages")

set(_pkg_src ${CMAKE_SOURCE_DIR}/packaging)
set(_pkg_out ${CMAKE_BINARY_DIR}/packaging)
set(_pkg_version "${PROJECT_VERSION}-${HOSTAGENT_PACKAGE_RELEASE}")

# --- systemd integration -------------------------------------------------------------------------
# /usr/lib, not /lib: lintian accepts both on bookworm, systemd reads both, and /usr/lib is where
# unit files belong once /usr is merged (Debian 12 installs merged /usr).
install(FILES ${_pkg_src}/systemd/hostagent.service ${_pkg_src}/systemd/hostagent.socket
        DESTINATION lib/systemd/system)
install(FILES ${_pkg_src}/systemd/sysusers.conf DESTINATION lib/sysusers.d RENAME hostagent.conf)
install(FILES ${_pkg_src}/systemd/tmpfiles.conf DESTINATION lib/tmpfiles.d RENAME hostagent.conf)
install(FILES ${_pkg_src}/systemd/modules-load.conf DESTINATION lib/modules-load.d RENAME hostagent.conf)
install(FILES ${_pkg_src}/systemd/hostagent-initramfs.path ${_pkg_src}/systemd/hostagent-initramfs.service
        DESTINATION lib/systemd/system)

# --- boot: the tenant NVMe controllers held from the nvme driver (docs/devices.md, packaging/boot) -
install(PROGRAMS ${_pkg_src}/boot/hold-at-boot ${_pkg_src}/boot/refresh-initramfs DESTINATION libexec/hostagent)
install(FILES ${_pkg_src}/boot/modprobe.conf DESTINATION lib/modprobe.d RENAME hostagent.conf)
install(PROGRAMS ${_pkg_src}/boot/initramfs-tools-hook DESTINATION share/initramfs-tools/hooks RENAME hostagent)
install(PROGRAMS ${_pkg_src}/boot/dracut-module-setup.sh DESTINATION lib/dracut/modules.d/90hostagent
        RENAME module-setup.sh)

# --- configuration and directories ---------------------------------------------------------------
install(FILES ${_pkg_src}/hostagent.yaml DESTINATION /etc/hostagent)
# The audit log's rotation (SIGHUP reopens it).
install(FILES ${_pkg_src}/logrotate.conf DESTINATION /etc/logrotate.d RENAME hostagent)
# The operator's templates (templates.directories' second entry): empty, theirs.
install(DIRECTORY DESTINATION /etc/hostagent/templates.d)
# 0755: QEMU (as libvirt-qemu) opens cloud-init seeds under /var/lib/hostagent/seeds by path.
install(DIRECTORY DESTINATION /var/lib/hostagent
        DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                              WORLD_READ WORLD_EXECUTE)
# The audit log and guests' console output: not for everyone.
install(DIRECTORY DESTINATION /var/log/hostagent
        DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE)

# --- generated at build time: man pages (gzip -9n: no name or timestamp, as lintian wants),
# shell completion (from hostagentctl's own command tree), the Debian changelog ---------------------
set(_pkg_generated)
foreach(_page hostagentd.8 hostagentctl.1)
  add_custom_command(OUTPUT ${_pkg_out}/${_page}.gz
                     COMMAND sh -c "gzip -9nc \"$1\" > \"$2\"" sh ${_pkg_src}/man/${_page} ${_pkg_out}/${_page}.gz
                     DEPENDS ${_pkg_src}/man/${_page}
                     COMMENT "Compressing the man page ${_page}" VERBATIM)
  list(APPEND _pkg_generated ${_pkg_out}/${_page}.gz)
endforeach()
foreach(_shell bash zsh)
  add_custom_command(OUTPUT ${_pkg_out}/completion.${_shell}
                     COMMAND sh -c "\"$1\" completion $2 > \"$3\"" sh $<TARGET_FILE:hostagentctl> ${_shell}
                             ${_pkg_out}/completion.${_shell}
                     DEPENDS hostagentctl
                     COMMENT "Generating hostagentctl's ${_shell} completion" VERBATIM)
  list(APPEND _pkg_generated ${_pkg_out}/completion.${_shell})
endforeach()
# The Debian changelog's top entry names the version being packaged, dated by the commit (the same
# sources give the same package).
execute_process(COMMAND git log -1 --format=%aD WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                OUTPUT_VARIABLE _pkg_date OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT _pkg_date)
  set(_pkg_date "Wed, 01 Jan 2025 00:00:00 +0000")
endif()
# (Written through configure_file so that an unchanged entry leaves the file, and its .gz, alone.)
file(WRITE ${_pkg_out}/changelog.Debian.new
     "hostagent (${_pkg_version}) unstable; urgency=medium\n\n"
     "  * Package of hostagent ${PROJECT_VERSION}, commit ${HOSTAGENT_GIT_COMMIT}.\n\n"
     " -- ${HOSTAGENT_PACKAGE_MAINTAINER}  ${_pkg_date}\n")
configure_file(${_pkg_out}/changelog.Debian.new ${_pkg_out}/changelog.Debian COPYONLY)
add_custom_command(OUTPUT ${_pkg_out}/changelog.Debian.gz
                   COMMAND sh -c "gzip -9nc \"$1\" > \"$2\"" sh ${_pkg_out}/changelog.Debian
                           ${_pkg_out}/changelog.Debian.gz
                   DEPENDS ${_pkg_out}/changelog.Debian VERBATIM)
list(APPEND _pkg_generated ${_pkg_out}/changelog.Debian.gz)
# Not part of `all` (the ASan build would run hostagentctl): scripts/package.sh builds it by name
# with the two binaries.
add_custom_target(hostagent_package_files DEPENDS ${_pkg_generated})

install(FILES ${_pkg_out}/hostagentd.8.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${_pkg_out}/hostagentctl.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${_pkg_out}/completion.bash DESTINATION share/bash-completion/completions RENAME hostagentctl)
install(FILES ${_pkg_out}/completion.zsh DESTINATION share/zsh/vendor-completions RENAME _hostagentctl)
install(FILES ${_pkg_src}/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Only in the .deb (component deb; the .rpm installs the default component alone, see
# CPACK_PROJECT_CONFIG_FILE below): the Debian changelog, and lintian's overrides.
install(FILES ${_pkg_out}/changelog.Debian.gz DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT deb)
install(FILES ${_pkg_src}/deb/lintian-overrides DESTINATION share/lintian/overrides RENAME hostagent COMPONENT deb)

# --- CPack: both generators ----------------------------------------------------------------------
set(CPACK_PACKAGE_NAME hostagent)
set(CPACK_PACKAGE_VENDOR hostagent)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${HOSTAGENT_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "VM placement and lifecycle agent for GPU hypervisor hosts")
# Debian wants description lines under 80 columns.
set(CPACK_PACKAGE_DESCRIPTION
    "hostagent runs on every GPU hypervisor host. It discovers the host (NUMA
nodes, PCIe switches, GPUs, RoCE NICs and their VFs, NVMe, IOMMU groups),
places VMs so that each GPU keeps the NIC under its own PCIe switch and
every vCPU and page stays on the devices' NUMA node, prepares the devices
(vfio-pci, SR-IOV VFs, peer-to-peer DMA) and drives libvirt. A local REST
API (hostagentctl is its client) creates, starts, stops and deletes VMs.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_CHECKSUM SHA256)
set(CPACK_GENERATOR DEB RPM)
set(CPACK_SOURCE_GENERATOR "")
# Read by cpack for each generator: the .rpm takes every component but "deb".
file(WRITE ${_pkg_out}/cpack_per_generator.cmake
     "if(CPACK_GENERATOR STREQUAL \"RPM\")\n"
     "  set(CPACK_INSTALL_CMAKE_PROJECTS \"${CMAKE_BINARY_DIR};${PROJECT_NAME};Unspecified;/\")\n"
     "endif()\n")
set(CPACK_PROJECT_CONFIG_FILE ${_pkg_out}/cpack_per_generator.cmake)

# --- DEB -----------------------------------------------------------------------------------------
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${HOSTAGENT_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Libraries from dpkg-shlibdeps (dpkg-dev), the daemons it drives written out.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# kmod: its modprobe runs the boot hold's install line (packaging/boot/modprobe.conf). The oldest
# libvirt and QEMU are Debian 12's, the oldest stack proven (docs/packaging.md): the renderer needs
# <qemu:override> (libvirt 8.2) and per-cell preallocation threads in a thread-context (QEMU 7.2,
# libvirt 9.0).
set(HOSTAGENT_MIN_LIBVIRT 9.0.0)
set(HOSTAGENT_MIN_QEMU 7.2)
# qemu-utils: libvirt runs its qemu-img to make each VM's qcow2 overlay (the disk step);
# qemu-system-x86 only recommends it.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libvirt-daemon-system (>= ${HOSTAGENT_MIN_LIBVIRT}), \
qemu-system-x86 (>= 1:${HOSTAGENT_MIN_QEMU}), qemu-utils (>= 1:${HOSTAGENT_MIN_QEMU}), kmod")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${_pkg_src}/deb/conffiles ${_pkg_src}/deb/postinst ${_pkg_src}/deb/prerm
                                       ${_pkg_src}/deb/postrm ${_pkg_src}/deb/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# --- RPM -----------------------------------------------------------------------------------------
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_RELEASE ${HOSTAGENT_PACKAGE_RELEASE})
set(CPACK_RPM_PACKAGE_LICENSE "${HOSTAGENT_PACKAGE_LICENSE}")
set(CPACK_RPM_PACKAGE_GROUP "System Environment/Daemons")
set(CPACK_RPM_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
# /etc and /var are absolute: the package cannot be moved.
set(CPACK_PACKAGE_RELOCATABLE OFF)
set(CPACK_RPM_PACKAGE_RELOCATABLE OFF)
# Built on Debian, rpmbuild cannot compute what the binaries need on an RPM distribution: Requires
# are written, as Fedora names the packages holding the libraries hostagentd and hostagentctl link
# (see docs/packaging.md). Built on an RPM distribution, rpmbuild computes the libraries itself.
if(EXISTS /etc/debian_version)
  set(CPACK_RPM_PACKAGE_AUTOREQ OFF)
  set(_pkg_rpm_libs ", boost-json, boost-url, hwloc-libs, libisofs, libnl3, libnvme, libvirt-libs, libxml2, openssl-libs,
pciutils-libs, pugixml, systemd-libs, yaml-cpp")
  string(REPLACE "\n" " " _pkg_rpm_libs "${_pkg_rpm_libs}")
endif()
set(CPACK_RPM_PACKAGE_AUTOPROV OFF)
set(CPACK_RPM_PACKAGE_REQUIRES "libvirt-daemon-driver-qemu >= ${HOSTAGENT_MIN_LIBVIRT}, \
qemu-kvm >= ${HOSTAGENT_MIN_QEMU}, qemu-img >= ${HOSTAGENT_MIN_QEMU}, kmod${_pkg_rpm_libs}")
set(CPACK_RPM_POST_INSTALL_SCRIPT_FILE ${_pkg_src}/rpm/post.sh)
set(CPACK_RPM_PRE_UNINSTALL_SCRIPT_FILE ${_pkg_src}/rpm/preun.sh)
set(CPACK_RPM_POST_UNINSTALL_SCRIPT_FILE ${_pkg_src}/rpm/postun.sh)
set(CPACK_RPM_USER_FILELIST "%config(noreplace) /etc/hostagent/hostagent.yaml"
    "%config(noreplace) /etc/logrotate.d/hostagent")
# Directories other packages own (filesystem, systemd, bash-completion, zsh, man-db, logrotate):
# listing them would make this package claim them.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
    /usr/sbin /usr/lib/systemd /usr/lib/systemd/system /usr/lib/sysusers.d /usr/lib/tmpfiles.d
    /usr/lib/modules-load.d /usr/lib/modprobe.d /usr/libexec /usr/share/initramfs-tools
    /usr/share/initramfs-tools/hooks /usr/lib/dracut /usr/lib/dracut/modules.d /usr/share/man /usr/share/man/man1 /usr/share/man/man8 /usr/share/bash-completion
    /usr/share/bash-completion/completions /usr/share/zsh /usr/share/zsh/vendor-completions /var /var/lib /var/log
    /etc/logrotate.d)
# No debuginfo subpackage and no /usr/lib/.build-id links: the binaries are stripped
# (CPACK_STRIP_FILES), as in the .deb.
set(CPACK_RPM_SPEC_MORE_DEFINE "%define debug_package %{nil}\n%define _build_id_links none")

include(CPack)
