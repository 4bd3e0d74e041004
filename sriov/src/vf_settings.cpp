// sriov/vf_settings: the small value helpers of the VF settings (link state names).
#include "hostagent/sriov/vf_netlink.hpp"

namespace hostagent::sriov {

const char* to_string(LinkState state) noexcept {
  switch (state) {
    case LinkState::automatic:
      return "auto";
    case LinkState::enable:
      return "enable";
    case LinkState::disable:
      return "disable";
  }
  return "?";
}

}  // namespace hostagent::sriov
