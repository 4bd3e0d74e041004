// cloudinit/vendor_data: the vendor-data script (see the header).
#include "vendor_data.hpp"

#include <algorithm>
#include <cstdint>
#include <set>

namespace hostagent::cloudinit::detail {
namespace {

constexpr const char* kTerminator = "HOSTAGENT_FILE";  // base64 text never holds '_'
constexpr std::size_t kLine = 76;

bool module_name(const std::string& name) {
  return !name.empty() && name.size() <= 55 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool plain_path_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-' || c == '/';
}

Status invalid_path(std::size_t i, const std::string& path, const std::string& why) {
  // The host's own files, never a request's: no API field to name.
  return Error{ErrorCode::invalid_argument, "vendor file " + std::to_string(i) + " path '" + path + "' " + why};
}

}  // namespace

Status check_guest_files(const std::vector<GuestFile>& files) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& path = files[i].path;
    if (path.size() < 2 || path.front() != '/' || path.back() == '/') {
      return invalid_path(i, path, "is not an absolute path to a file");
    }
    for (const char c : path) {
      if (!plain_path_char(c)) return invalid_path(i, path, "has a character outside A-Z a-z 0-9 . _ - /");
    }
    if (path.find("/./") != std::string::npos || path.find("/../") != std::string::npos || path.ends_with("/.") ||
        path.ends_with("/..") || path.find("//") != std::string::npos) {
      return invalid_path(i, path, "has an empty, '.' or '..' component");
    }
    if (!seen.insert(path).second) return invalid_path(i, path, "is given twice");
    if (!files[i].reload_module.empty() && !module_name(files[i].reload_module)) {
      return Error{ErrorCode::invalid_argument, "vendor file " + std::to_string(i) + " reload module '" +
                                                    files[i].reload_module + "' is not a module name (a-z 0-9 _)"};
    }
  }
  return ok_status();
}

std::string base64_lines(const std::string& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string flat;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    uint32_t group = 0;
    for (std::size_t k = 0; k < 3; ++k) {
      group = (group << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0U);
    }
    for (std::size_t k = 0; k < 4; ++k) flat += k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 0x3f] : '=';
  }
  std::string out;
  for (std::size_t i = 0; i < flat.size(); i += kLine) out += flat.substr(i, kLine) + "\n";
  return out;
}

std::string render_vendor_data(const std::vector<GuestFile>& files) {
  if (files.empty()) return "";
  std::string out =
      "#!/bin/sh\n"
      "# hostagent's vendor data: files the host rendered for this VM. cloud-init runs it once per\n"
      "# instance; a guest's user data turns it off with vendor_data: {enabled: false}.\n"
      "set -eu\n"
      "umask 022\n"
      "put() {\n"
      "  mkdir -p \"$(dirname \"$1\")\"\n"
      "  base64 -d > \"$1.hostagent-new\"\n"
      "  mv -f \"$1.hostagent-new\" \"$1\"\n"
      "}\n";
  const bool reloads =
      std::any_of(files.begin(), files.end(), [](const GuestFile& f) { return !f.reload_module.empty(); });
  if (reloads) {
    // modprobe reads modprobe.d when it loads a module; udev loaded the device's driver at boot,
    // before cloud-init ran. Loaded again, with the modules that hold it, while no process uses it.
    out +=
        "reload() {\n"
        "  sys=\"${HOSTAGENT_SYSFS:-/sys}\"  # the tests' fake sysfs; in a guest, /sys\n"
        "  [ -d \"$sys/module/$1\" ] || return 0\n"
        "  holders=\"$(ls \"$sys/module/$1/holders\" 2>/dev/null || true)\"\n"
        "  if modprobe -r $holders \"$1\" 2>/dev/null && modprobe -a \"$1\" $holders; then\n"
        "    echo \"hostagent: module $1 loaded again with its options\"\n"
        "  else\n"
        "    echo \"hostagent: module $1 is in use: its options hold from the next boot\" >&2\n"
        "  fi\n"
        "}\n";
  }
  for (const auto& file : files) {
    out += "put '" + file.path + "' <<'" + kTerminator + "'\n" + base64_lines(file.content) + kTerminator + "\n";
    if (!file.reload_module.empty()) out += "reload '" + file.reload_module + "'\n";
  }
  return out;
}

}  // namespace hostagent::cloudinit::detail
