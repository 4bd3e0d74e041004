// Reads an ISO 9660 image back with libisofs's reader (not the code that wrote it): its volume id,
// which extensions it carries, and the files of its root directory with their contents.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace hostagent::cloudinit::testing {

// Which directory tree names the files: Rock Ridge (what Linux's isofs shows by default), Joliet
// (what it shows with norock), or the plain ISO 9660 names.
enum class Tree { rock_ridge, joliet, iso9660 };

struct IsoContents {
  std::string volume_id;
  bool rock_ridge = false;
  bool joliet = false;
  std::map<std::string, std::string> files;  // root directory entry name -> contents
  int directories = 0;                       // directories in the root (a seed has none)
};

// REQUIREs that libisofs reads the image.
IsoContents read_iso(const std::filesystem::path& iso, Tree tree = Tree::rock_ridge);

}  // namespace hostagent::cloudinit::testing
