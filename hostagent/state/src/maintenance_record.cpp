// state/maintenance_record: the host's maintenance as one JSON file, with its format's version.
#include "hostagent/state/maintenance_record.hpp"

#include <array>
#include <boost/json.hpp>

#include "hostagent/common/durable_file.hpp"
#include "hostagent/common/json_fields.hpp"
#include "hostagent/common/text.hpp"
#include "record_checks.hpp"
#include "record_file.hpp"

namespace hostagent::state {
namespace json = boost::json;
namespace {

constexpr std::size_t kMaxMaintenanceRecordBytes = 64U << 10U;

constexpr std::array kModes{service::MaintenanceMode::in_service, service::MaintenanceMode::cordoned,
                            service::MaintenanceMode::draining, service::MaintenanceMode::drained};

std::optional<service::MaintenanceMode> mode_of(std::string_view text) {
  for (const auto mode : kModes) {
    if (service::to_string(mode) == text) return mode;
  }
  return std::nullopt;
}

bool drains(service::MaintenanceMode mode) {
  return mode == service::MaintenanceMode::draining || mode == service::MaintenanceMode::drained;
}

// What write refuses and read reports: the same rules, so what is written can be read.
std::string maintenance_problem(const MaintenanceRecord& record) {
  if (record.reason.size() > service::kMaxMaintenanceReasonBytes) {
    return "reason is " + std::to_string(record.reason.size()) + " bytes, more than " +
           std::to_string(service::kMaxMaintenanceReasonBytes);
  }
  if (record.reason.empty() && record.mode != service::MaintenanceMode::in_service) {
    return "reason is empty, and a host in maintenance says why";
  }
  if (auto problem = detail::text_problem("reason", record.reason); !problem.empty()) return problem;
  if (auto problem = detail::text_problem("principal", record.principal); !problem.empty()) return problem;
  if (auto problem = detail::timestamp_problem("since", record.since, true); !problem.empty()) return problem;
  if (auto problem = detail::timestamp_problem("deadline", record.deadline, drains(record.mode)); !problem.empty()) {
    return problem;
  }
  if (!drains(record.mode) && !record.deadline.empty()) return "deadline is set, and only a drain has one";
  return {};
}

std::string maintenance_to_json(const MaintenanceRecord& record) {
  return json::serialize(json::object{{"format", kMaintenanceFormat},
                                      {"mode", service::to_string(record.mode)},
                                      {"reason", record.reason},
                                      {"principal", record.principal},
                                      {"since", record.since},
                                      {"deadline", record.deadline}}) +
         "\n";
}

Result<MaintenanceRecord> maintenance_from(const json::value& document) {
  HA_TRY(const auto fields, json_fields::JsonFields::of(document, ""));
  HA_TRY_STATUS(json_fields::format_version(fields, kMaintenanceFormat));
  MaintenanceRecord out;
  HA_TRY(const auto mode, fields.string("mode"));
  const auto parsed = mode_of(mode);
  if (!parsed) {
    return Error{ErrorCode::parse_error,
                 "mode " + text::quoted(mode) + " is none of in_service, cordoned, draining, drained"};
  }
  out.mode = *parsed;
  HA_TRY(out.reason, fields.string("reason"));
  HA_TRY(out.principal, fields.string("principal"));
  HA_TRY(out.since, fields.string("since"));
  HA_TRY(out.deadline, fields.string("deadline"));
  return out;
}

}  // namespace

Result<std::optional<MaintenanceRecord>> read_maintenance_record(const std::filesystem::path& file) {
  const auto in_file = [&](const std::string& why) {
    return Error{ErrorCode::parse_error, "maintenance record " + file.string() + ": " + why +
                                             " (it says whether the host takes VMs: repair it, or set the "
                                             "maintenance again through the API once it is removed)"};
  };
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec))) {
    return std::optional<MaintenanceRecord>();
  }
  HA_TRY(const auto document, detail::read_json_document(file, kMaxMaintenanceRecordBytes, in_file));
  auto record = maintenance_from(document);
  if (!record.ok()) return in_file(record.error().message);
  if (auto problem = maintenance_problem(*record); !problem.empty()) return in_file(problem);
  return std::optional(std::move(record).value());
}

Status write_maintenance_record(const std::filesystem::path& file, const MaintenanceRecord& record) {
  if (auto problem = maintenance_problem(record); !problem.empty()) {
    return Error{ErrorCode::invalid_argument, "maintenance record " + file.string() + ": " + problem};
  }
  return durable::replace_file(file, maintenance_to_json(record));
}

}  // namespace hostagent::state
