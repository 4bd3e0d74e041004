// Test helper: built-in simulated hosts written as sysfs trees and discovered from them, the way the
// daemon would read a real host.
#pragma once

#include <filesystem>
#include <string>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "test_support.hpp"

namespace hostagent::testing {

// Writes simhost's NAME under dir and discovers it; the model's source reads "simulated:NAME" so
// outputs do not depend on the scratch path. Fails the calling test case when either step fails.
// For a test that changes the tree; one that only reads it takes SharedHostTree or discover_shared.
numa::HostModel discover_simulated(const std::string& name, const TempDir& dir);

// simhost's NAME (or a spec of the test's own), written once under
// tests_scratch_parent()/simulated/NAME-DIGEST (the digest of what simhost writes for it, so that
// another spec's or another build's tree is never read) and read by every test process after it. Why: a vela2 tree is
// 10,311 files, and each test case writing and removing its own was most of the unit tier's time on an ext4 disk
// without a journal (test_support.cpp, spread_subdirectories). Read only. When this goes out of scope the tree is
// compared with the manifest made when it was written: a test that changed it fails, naming the first difference, and
// the tree is removed so that the next test writes it afresh.
class SharedHostTree {
 public:
  explicit SharedHostTree(const std::string& name);
  explicit SharedHostTree(const simhost::HostSpec& spec);
  ~SharedHostTree();
  SharedHostTree(const SharedHostTree&) = delete;
  SharedHostTree& operator=(const SharedHostTree&) = delete;
  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
};

// The model discovered from NAME's (or the spec's) shared tree: discovery only reads. Its source
// reads "simulated:NAME".
numa::HostModel discover_shared(const std::string& name);
numa::HostModel discover_shared(const simhost::HostSpec& spec);

}  // namespace hostagent::testing
