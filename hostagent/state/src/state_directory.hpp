// state/state_directory: the directories of the daemon's durable JSON files (the journal, the
// create requests): made private on first use, listed with a write that never committed discarded.
// The rules of one such directory are the same for every kind of file kept in it.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent::state::detail {

inline constexpr std::string_view kJsonSuffix = ".json";

// Creates the directory (mode 0700) when missing; `what` names it in errors ("journal").
Status open_private_directory(const std::filesystem::path& directory, std::string_view what);

// A file stem the daemon made from an id: no separators, no "." or "..", no hidden files.
bool is_file_id(std::string_view id);

// Calls `read(path, id)` for every ID.json in the directory, discarding ID.json.tmp leftovers
// (durable::replace_file's writes that a crash cut short: the committed file beside it, or none,
// is the truth) and skipping any other name (editors' backups and the like).
Status for_each_json_file(const std::filesystem::path& directory, std::string_view what,
                          const std::function<Status(const std::filesystem::path&, const std::string&)>& read);

}  // namespace hostagent::state::detail
