// bench/scratch_dir: a directory made for one benchmark run and removed with everything in it.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace hostagent::bench {

class ScratchDir {
 public:
  // A fresh PARENT/hostagent-bench-NAME-XXXXXX; throws when mkdtemp cannot make it.
  explicit ScratchDir(const std::string& name, const std::filesystem::path& parent = "/tmp") {
    std::string templ = (parent / ("hostagent-bench-" + name + "-XXXXXX")).string();
    if (mkdtemp(templ.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + templ);
    }
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace hostagent::bench
