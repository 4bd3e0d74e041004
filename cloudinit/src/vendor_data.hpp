// cloudinit/vendor_data: the seed's vendor-data, the host's own files for the guest (the NCCL
// topology file, /etc/nccl.conf, the nvidia module's options). NoCloud reads "vendor-data" beside user-data; cloud-init
// runs it apart from the tenant's user data, so neither can drop the other.
//
// Why a shell script and not cloud-config write_files: cloud-init merges vendor cloud-config under
// the user's with its default strategy, which drops a vendor list when the user data has the same
// key (write_files, runcmd): a template's or a tenant's write_files would silently discard ours
// (canonical/cloud-init PR 6933 describes it). A vendor-data script runs as its own part
// (cc_scripts_vendor, once per instance), whatever the user data says. Each file's content travels
// base64-encoded inside a quoted here-document, so no byte of it is read by the shell; paths are
// checked to a plain character set before they are written into the script.
#pragma once

#include <string>
#include <vector>

#include "hostagent/cloudinit/nocloud_seed.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::cloudinit::detail {

// invalid_argument naming files[i].path unless it is absolute, of A-Z a-z 0-9 . _ - / only, with
// no "." or ".." component; when two files name one path; and naming a reload module that is not
// a module name (a-z 0-9 _).
Status check_guest_files(const std::vector<GuestFile>& files);

// The script; "" for no files. The files must have passed check_guest_files.
std::string render_vendor_data(const std::vector<GuestFile>& files);

// RFC 4648 base64, wrapped at 76 characters a line (what coreutils' base64 -d reads).
std::string base64_lines(const std::string& bytes);

}  // namespace hostagent::cloudinit::detail
