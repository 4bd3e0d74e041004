// api/rest: GET /v1/vms's body, by the list's version.
#include "vm_list_body.hpp"

#include <boost/json/serialize.hpp>

#include "hostagent/api/vm_json.hpp"

namespace hostagent::api::detail {

std::string VmListBody::body_of(const service::VmList& list) {
  std::lock_guard lock(mutex_);
  if (made_ && version_ == list.version) return body_;
  boost::json::array vms;
  for (const auto& vm : list) vms.push_back(to_json(vm));
  body_ = boost::json::serialize(boost::json::object{{"vms", std::move(vms)}});
  version_ = list.version;
  made_ = true;
  return body_;
}

}  // namespace hostagent::api::detail
