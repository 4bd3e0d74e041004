// cloudinit/user_data_parts: the seed's user data when both the template (boot.cloud_init) and the
// request (user_data, or the SSH keys) give some. The rule: one MIME multipart, the template's part
// first, the request's second; cloud-init runs both and merges their cloud-config, the request's part
// carrying `Merge-Type: list(append)+dict(recurse_array)+str()`, so its lists add to the template's
// (write_files, runcmd) and its scalars win (cloud-init docs, "Merging user data sections").
// Each part is typed by its first line, as cloud-init itself does (cloudinit/handlers/__init__.py
// INCLUSION_TYPES_MAP); a part that is already MIME, or compressed, cannot be joined and is refused.
#pragma once

#include <optional>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent::cloudinit::detail {

// The MIME content type cloud-init gives user data that starts this way, or nullopt ("Content-Type:"
// MIME, gzip, anything unknown).
std::optional<std::string> part_type(const std::string& user_data);

// One part as is; two joined by the rule above. invalid_argument naming `field` when a part cannot
// be typed, saying why.
Result<std::string> join_user_data(const std::string& template_part, const std::string& request_part,
                                   const std::string& field);

}  // namespace hostagent::cloudinit::detail
