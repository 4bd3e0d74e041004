// Test helper: the fake kernel's write routing, fault injection and tree snapshots.
#include "fake_kernel.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace hostagent::testing {

FakeKernel::FakeKernel(fs::path root) : root_(std::move(root)) {}

fs::path FakeKernel::host_path(const std::string& kernel_path) const {
  return root_ / fs::path(kernel_path).relative_path();
}

void FakeKernel::store(const std::string& kernel_path, std::string_view value) const {
  std::ofstream out(host_path(kernel_path), std::ios::binary | std::ios::trunc);
  out << value;
}

Error FakeKernel::refuse(int err, const std::string& kernel_path, std::string_view value) const {
  return sysfs_write_error(err, host_path(kernel_path), value);
}

void FakeKernel::model(const std::string& pattern, Model model) {
  const std::lock_guard lock(mutex_);
  models_.push_back(Entry{std::regex(pattern), std::move(model)});
}

void FakeKernel::fail_write(const std::string& pattern, int err, int nth) {
  const std::lock_guard lock(mutex_);
  faults_.push_back(Fault{std::regex(pattern), err, nth});
}

void FakeKernel::delay(const std::string& pattern, std::chrono::milliseconds duration) {
  const std::lock_guard lock(mutex_);
  delays_.push_back({std::regex(pattern), duration});
}

Status FakeKernel::write(const std::string& kernel_path, std::string_view value) {
  std::chrono::milliseconds wait{0};
  Status status = ok_status();
  {
    std::unique_lock lock(mutex_);
    held_ = &lock;
    status = write_locked(kernel_path, value);
    held_ = nullptr;
    for (const auto& delay : delays_) {
      if (std::regex_match(kernel_path, delay.pattern)) wait = std::max(wait, delay.duration);
    }
  }
  if (wait.count() > 0) std::this_thread::sleep_for(wait);
  return status;
}

Status FakeKernel::write_locked(const std::string& kernel_path, std::string_view value) {
  // Every matching fault counts this write, so faults on overlapping patterns keep their own nth.
  // One fault fires per write; another due on the same write fires on the next matching one.
  auto due = faults_.end();
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (!std::regex_match(kernel_path, it->pattern)) continue;
    if (--it->remaining <= 0 && due == faults_.end()) due = it;
  }
  if (due != faults_.end()) {
    const int err = due->err;
    faults_.erase(due);
    ++faults_fired_;
    return refuse(err, kernel_path, value);
  }
  // As open(2) without O_CREAT on sysfs: an attribute that is not there is ENOENT.
  std::error_code ec;
  if (!fs::is_regular_file(host_path(kernel_path), ec)) return refuse(ENOENT, kernel_path, value);
  writes_.emplace_back(kernel_path, std::string(value));
  for (auto& entry : models_) {
    if (std::regex_match(kernel_path, entry.pattern)) return entry.model(*this, kernel_path, value);
  }
  store(kernel_path, value);
  return ok_status();
}

std::map<std::string, std::string> snapshot_tree(const fs::path& root) {
  std::map<std::string, std::string> entries;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    // Lexical: the iterator's paths begin with root. fs::relative would resolve every component
    // of both (weakly_canonical: a readlink each), and the rollback tests snapshot the tree at every step.
    const std::string relative = it->path().lexically_relative(root).string();
    if (it->is_symlink()) {
      entries[relative] = "link:" + fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      entries[relative] = "dir";
    } else {
      std::ifstream in(it->path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      entries[relative] = "file:" + text.str();
    }
  }
  return entries;
}

std::string describe_difference(const std::map<std::string, std::string>& before,
                                const std::map<std::string, std::string>& after) {
  std::string out;
  for (const auto& [path, what] : before) {
    const auto found = after.find(path);
    if (found == after.end()) {
      out += "- " + path + ": " + what + "\n";
    } else if (found->second != what) {
      out += "~ " + path + ": " + what + " -> " + found->second + "\n";
    }
  }
  for (const auto& [path, what] : after) {
    if (before.count(path) == 0) out += "+ " + path + ": " + what + "\n";
  }
  return out;
}

}  // namespace hostagent::testing
