// api/host_json: the stable JSON representation of the host model, shared by `hostagentctl
// topology --json` and the REST API's /v1/host. The format is documented in docs/topology-json.md;
// a field is added, never renamed or retyped, without bumping format_version.
#pragma once

#include <boost/json/value.hpp>
#include <string>

#include "hostagent/numa/host_model.hpp"

namespace hostagent::api {

inline constexpr int kTopologyFormatVersion = 1;

boost::json::value to_json(const numa::HostModel& model);
// Two-space indented, keys in a fixed order, newline at the end: stable for golden files and diffs.
std::string to_pretty_json(const boost::json::value& value);

}  // namespace hostagent::api
