// api/rest, private: GET /v1/vms's body, kept with the version of the list it was made from
// (service::VmList): a control plane polls the list far more often than VMs change, and the JSON is
// most of what the answer costs, so it is serialised once per version, not once per request.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "hostagent/service/vm_service.hpp"

namespace hostagent::api::detail {

class VmListBody {
 public:
  // The body for `list`: the kept one when it was made from the same version.
  std::string body_of(const service::VmList& list);

 private:
  std::mutex mutex_;
  bool made_ = false;
  uint64_t version_ = 0;
  std::string body_;
};

}  // namespace hostagent::api::detail
