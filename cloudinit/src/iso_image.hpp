// cloudinit/iso_image: a small ISO 9660 image built in memory with libisofs: a volume id and plain
// files in the root directory, with Rock Ridge and Joliet so that their names survive as given
// (plain ISO 9660 level 1 would turn "user-data" into "USER_DAT.;1").
#pragma once

#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::cloudinit::detail {

struct IsoFile {
  std::string name;  // a root directory entry: ASCII, no '/'
  std::string contents;
};

// The image's bytes (a whole number of 2048-byte blocks). ErrorCode::internal with libisofs's
// message when libisofs fails.
Result<std::string> build_iso(const std::string& volume_id, const std::vector<IsoFile>& files);

}  // namespace hostagent::cloudinit::detail
