// hostagentctl: waiting for operations, with a progress bar or plain lines.
#include "progress.hpp"

#include <thread>

#include "hostagent/common/text.hpp"
#include "table.hpp"

namespace hostagent::ctl {
namespace {

std::string text(const boost::json::value& operation, const char* key) {
  const auto* object = operation.if_object();
  const auto* value = object == nullptr ? nullptr : object->if_contains(key);
  return value != nullptr && value->is_string() ? text::shown(value->get_string()) : std::string();
}

std::int64_t number(const boost::json::value& operation, const char* key) {
  const auto* object = operation.if_object();
  const auto* value = object == nullptr ? nullptr : object->if_contains(key);
  if (value == nullptr) return 0;
  if (value->is_int64()) return value->get_int64();
  if (value->is_uint64()) return static_cast<std::int64_t>(value->get_uint64());
  return 0;
}

bool ended(const boost::json::value& operation) {
  const auto state = text(operation, "state");
  return state == "succeeded" || state == "failed";
}

std::string title(const boost::json::value& operation) {
  return text(operation, "kind") + " " + text(operation, "vm");
}

// "3/5 define", "queued", "succeeded": where the operation is now.
std::string position(const boost::json::value& operation) {
  auto state = text(operation, "state");
  const auto count = number(operation, "step_count");
  if (state == "queued" || count == 0) return state;
  std::string where =
      std::to_string(number(operation, "step_number")) + "/" + std::to_string(count) + " " + text(operation, "step");
  if (state != "running") where += " (" + state + ")";
  return where;
}

}  // namespace

std::string progress_line(const boost::json::value& operation, int bar_width) {
  const auto count = number(operation, "step_count");
  auto done = number(operation, "step_number");
  if (text(operation, "state") == "succeeded") done = count;
  if (text(operation, "state") == "running" && done > 0) --done;  // the step shown is still running
  const int filled = count > 0 ? static_cast<int>(done * bar_width / count) : 0;
  return title(operation) + " [" + std::string(filled, '#') + std::string(bar_width - filled, '-') + "] " +
         position(operation);
}

std::string progress_plain(const boost::json::value& operation) {
  return title(operation) + ": " + position(operation);
}

Status check_operation(const boost::json::value& operation, const std::string& where) {
  const auto* object = operation.if_object();
  if (object == nullptr)
    return Error{ErrorCode::parse_error, where + ": the answer is not an operation (not a JSON object)"};
  const auto* id = object->if_contains("id");
  if (id == nullptr || !id->is_string() || id->get_string().empty()) {
    return Error{ErrorCode::parse_error, where + ": the answer is not an operation (no string \"id\")"};
  }
  const auto state = text(operation, "state");
  if (state != "queued" && state != "running" && state != "succeeded" && state != "failed") {
    return Error{ErrorCode::parse_error,
                 where + ": the answer is not an operation (\"state\" is not queued, running, succeeded or failed)"};
  }
  return ok_status();
}

Result<boost::json::value> wait_for_operation(api::ApiClient& client, const boost::json::value& operation,
                                              const WaitSettings& settings, std::ostream& progress) {
  HA_TRY_STATUS(check_operation(operation, "the operation to wait for"));
  const std::string target = "/v1/operations/" + text(operation, "id");
  boost::json::value current = operation;
  std::string shown;
  for (;;) {
    const auto line = settings.terminal ? progress_line(current) : progress_plain(current);
    if (line != shown) {
      progress << (settings.terminal ? "\r\033[K" + line : line + "\n") << std::flush;
      shown = line;
    }
    if (ended(current)) break;
    std::this_thread::sleep_for(settings.poll_interval);
    HA_TRY(current, client.get_json(target));
    HA_TRY_STATUS(check_operation(current, "GET " + target));
  }
  if (settings.terminal) progress << "\n";
  return current;
}

std::string failure_message(const boost::json::value& operation) {
  std::string message = title(operation) + " failed";
  if (!text(operation, "step").empty()) {
    message += " at " + text(operation, "step") + " (" + std::to_string(number(operation, "step_number")) + "/" +
               std::to_string(number(operation, "step_count")) + ")";
  }
  const auto* object = operation.if_object();
  const auto* error = object == nullptr ? nullptr : object->if_contains("error");
  if (error != nullptr && error->is_object()) {
    message += ": " + display(*error, "detail");
  }
  return message;
}

}  // namespace hostagent::ctl
