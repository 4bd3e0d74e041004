// numa/pci_address: the host model names PCI functions with common's PciAddress.
#pragma once

#include "hostagent/common/pci_address.hpp"

namespace hostagent::numa {

using hostagent::PciAddress;

}  // namespace hostagent::numa
