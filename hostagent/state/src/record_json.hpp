// state/record_json: the VM record as JSON, for the journal, and a reader for JSON objects whose
// every error names the field's path ("record.inputs.macs[2]"). Fields mirror the XML record.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/json_fields.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/state/vm_record.hpp"

namespace hostagent::state::detail {

using json_fields::JsonFields;

boost::json::object record_to_json(const VmRecord& record);
// Reads a record written by record_to_json; errors are parse_error naming the field under `fields`.
Result<VmRecord> record_from_json(const JsonFields& fields);

}  // namespace hostagent::state::detail
