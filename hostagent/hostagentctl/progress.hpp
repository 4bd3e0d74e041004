// hostagentctl waiting for an operation: polls GET /v1/operations/ID and shows how far it got, as
// a redrawn bar on a terminal ("create train-0 [####----] 3/5 define") or one line per step when
// stderr is a file or a pipe, so logs stay readable.
#pragma once

#include <boost/json/value.hpp>
#include <chrono>
#include <ostream>
#include <string>

#include "hostagent/api/api_client.hpp"

namespace hostagent::ctl {

// "create train-0 [####----] 3/5 define"; "create train-0 [--------] queued" before it runs.
std::string progress_line(const boost::json::value& operation, int bar_width = 8);
// One line per change for a non-terminal: "create train-0: 3/5 define".
std::string progress_plain(const boost::json::value& operation);

struct WaitSettings {
  std::chrono::milliseconds poll_interval{200};
  bool terminal = false;  // draw a bar redrawn in place
};

// An operation as the API answers it: an object with a string id and a state of queued, running,
// succeeded or failed. parse_error naming `where` and what is missing otherwise: what answers may
// not be hostagentd, and a wait on an operation that cannot end would never return.
Status check_operation(const boost::json::value& operation, const std::string& where);

// Polls until the operation succeeds or fails and returns its final JSON; errors are the API's
// (the daemon went away, the operation was forgotten), not the operation's own failure.
Result<boost::json::value> wait_for_operation(api::ApiClient& client, const boost::json::value& operation,
                                              const WaitSettings& settings, std::ostream& progress);

// The failed operation's problem, worded for the operator: "create train-0 failed at define
// (3/5): DETAIL".
std::string failure_message(const boost::json::value& operation);

}  // namespace hostagent::ctl
