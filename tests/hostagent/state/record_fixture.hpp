// Records and domain XML for the state tests.
#pragma once

#include <pugixml.hpp>

#include <functional>
#include <string>

#include "hostagent/state/journal.hpp"
#include "hostagent/state/vm_record.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {

// The rendered Vela 2 domain from the golden tests; its VM is named kGoldenName.
inline constexpr const char* kGoldenName = "gx3-32x256x2h100";
std::string golden_domain_xml();

// A record with every field set, held by VM `name`.
VmRecord full_record(const std::string& name);

// CHECKs every field of actual against expected that both the domain metadata and the journal keep
// (rdma and nccl_topology are in the metadata only).
void check_same(const VmRecord& actual, const VmRecord& expected);

// The hostagent element of an embedded full record, as virDomainGetMetadata returns it.
std::string bare_element_xml();

// Loads xml, applies edit to its document, and serialises it again.
std::string edited(const std::string& xml, const std::function<void(pugi::xml_document&)>& edit);

// The first element (depth-first) whose name is `name`; empty when none.
pugi::xml_node find_element(pugi::xml_node root, const std::string& name);

// The journal in `directory`; fails the test case when it does not open.
Journal open_journal(const std::filesystem::path& directory);

using ::hostagent::testing::contains;
using ::hostagent::testing::write_text_file;

}  // namespace hostagent::state::testing
